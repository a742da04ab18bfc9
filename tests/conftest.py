"""Session-wide test setup.

Tests start throwaway local Ray clusters: Ray 2.60's default token
authentication would write ~/.ray/auth_token and warn on every start.
"""

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

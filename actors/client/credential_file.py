"""The first super user's credential, written at start, and credential files read by the CLI (issue 49).

The bootstrap problem: with `ray_credentials` on, every administrative call
needs a credential, including the one that issues the first. As
Elasticsearch's `elasticsearch-reset-password` and Kafka's SCRAM bootstrap
do, the service's start makes it: `actors.start(..., ray_credentials=True)`
(`raygroups start --ray-credentials`) issues a credential of the first of
`kafka_listener.super_users` (with none, `RayGroups:admin`, made the super user:
a principal type no SASL login or TLS certificate maps to, so no Kafka client can
be it)
through the registry's unchecked `serve`, and writes it to
`<data_dir>/admin.credential`, readable by its owner only (0600, written
under another name and renamed, so no reader sees half of it). Each start
writes a new one (valid `TTL_S`), the older ones stay valid until they
expire or are revoked.

`read_credential_file` is the CLI's `--credential-file`: refused with the
reason when the file is missing, empty, or readable by others (as ssh
refuses a private key anyone can read): a credential is a password.
"""

from __future__ import annotations

import os
import stat

from actors.core.settings import KafkaListenerSettings

FILE_NAME = "admin.credential"
DEFAULT_SUPER_USER = "RayGroups:admin"  # the gateways name every Kafka client User:<name>
TTL_S = 365 * 86400


def with_super_user(listener: KafkaListenerSettings) -> KafkaListenerSettings:
    """`listener` with `DEFAULT_SUPER_USER` its super user when it names none."""
    from dataclasses import replace

    return listener if listener.super_users else replace(listener, super_users=(DEFAULT_SUPER_USER,))


def bootstrap_principal(listener: KafkaListenerSettings) -> str:
    return str(listener.super_users[0]) if listener.super_users else DEFAULT_SUPER_USER


def credential_path(data_dir: str) -> str:
    return os.path.join(os.path.abspath(data_dir), FILE_NAME)


def write_credential_file(data_dir: str, credential: str) -> str:
    """Write `credential` to `<data_dir>/admin.credential`, mode 0600; its path."""
    path = credential_path(data_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask, or a leftover file's mode
        os.write(fd, (credential + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    return path


def read_credential_file(path: str) -> str:
    """The credential in `path`; ValueError why not."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="ascii") as f:
            credential = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"credential file {path}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"credential file {path} is readable by others (mode {stat.S_IMODE(mode):o}): "
                         f"chmod 600 {path}")
    if not credential:
        raise ValueError(f"credential file {path} is empty")
    return credential

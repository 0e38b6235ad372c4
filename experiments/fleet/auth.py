"""Ray's token authentication for a runner fleet: the cluster's shared token, and the Ray
environment that turns it on for `ray start` (`luma runner join`) and for a campaign head that
joins the cluster as a driver.

Ray (>= 2.52) reads its mode from `RAY_AUTH_MODE` and the token from `RAY_AUTH_TOKEN`, else the
file `RAY_AUTH_TOKEN_PATH` names, else `~/.ray/auth_token`; its default is no authentication.
LUMA turns token mode on unless the user set `RAY_AUTH_MODE` (`disabled` turns it off), and uses
the token the user named (those variables, or Ray's own file), else the project's
`keys/ray-auth-token` (0600): `luma runner join --head` makes it; every other runner and the
campaign head need a copy of it (docs/fleet.md).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import ConfigError
from luma.kb.trust.attestation import keys_dir

TOKEN_FILE = "ray-auth-token"


def token_file(home: Path) -> Path:
    """Where a project keeps its cluster's token."""
    return keys_dir(home) / TOKEN_FILE


def ray_default_token() -> Path:
    """Ray's own token file (`ray get-auth-token --generate` writes it)."""
    return Path.home() / ".ray" / "auth_token"


@dataclass(frozen=True)
class Auth:
    """How a Ray process of this project authenticates: the variables to add to its
    environment, and where its token comes from (in words; None when authentication is off)."""

    env: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    made: bool = False

    @property
    def on(self) -> bool:
        return self.token is not None


def _make(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))


def resolve(home: Path, environ: Mapping[str, str], *, create: bool) -> Auth:
    """The authentication of a Ray process started or joined from the project at `home`, given
    the user's environment `environ`; `create`: make the project's token when there is none (a
    new cluster's head). A ConfigError saying how to get the token when there is none."""
    mode = environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.strip().lower() != "token":
        return Auth()  # the user's explicit choice (RAY_AUTH_MODE=disabled)
    env = {"RAY_AUTH_MODE": "token"}
    if environ.get("RAY_AUTH_TOKEN"):
        return Auth(env, "RAY_AUTH_TOKEN")
    if environ.get("RAY_AUTH_TOKEN_PATH"):
        return Auth(env, environ["RAY_AUTH_TOKEN_PATH"])
    path = token_file(home)
    if path.is_file():
        return Auth({**env, "RAY_AUTH_TOKEN_PATH": str(path)}, str(path))
    if create:
        _make(path)
        return Auth({**env, "RAY_AUTH_TOKEN_PATH": str(path)}, str(path), made=True)
    if ray_default_token().is_file():
        return Auth(env, str(ray_default_token()))
    raise ConfigError(f"no token for the Ray cluster: copy the token file of the cluster's head (its project's "
                      f"keys/{TOKEN_FILE}) to {path} (mode 0600), or set RAY_AUTH_TOKEN_PATH to it; "
                      "RAY_AUTH_MODE=disabled for a cluster started without token authentication", field="token")

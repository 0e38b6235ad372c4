"""Runner attestations: Ed25519 signatures over a record's content hash, and runner key files.

A record that a runner emits carries an `attestation` block: the signer's key fingerprint, the
algorithm and the signature. What is signed is the record's content hash (the SHA-256 of its
canonical JSON, which leaves the attestation out: kb/records/loader.py), as the bytes of
`luma-record-v1:<hash>`; the prefix keeps a record signature from meaning anything else.

Keys live under `$LUMA_HOME/keys/`: `NAME.key` (PKCS8 PEM, mode 0600, created that way so it is
never readable by others even for a moment) and `NAME.pub` (base64 of the raw 32-byte public
key; 0600 as well, like everything in the project: copy it out to hand it on). `keys/default`
names the key runners sign with (`luma runner keygen` writes it);
`LUMA_RUNNER_KEY` (Settings.runner_key) names another. The crypto is the `cryptography`
package's; it is imported only where a key is used, so reading records never loads it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from luma import names
from luma.errors import ConfigError, RecordError, TrustError

ALGORITHM = "ed25519"
#: Domain separation: a signature over a record hash can never be replayed as another message.
DOMAIN = b"luma-record-v1:"
KEYS = "keys"
#: A key's name: a slug, so that it is a safe file name and easy to type.
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_KEY_FILE_BYTES = 64 * 1024

#: What every attestable record's JSON Schema says about the block.
SCHEMA_NOTE = (
    " An optional `attestation` block {key, algorithm: ed25519, signature} is a runner's Ed25519 signature "
    "over `luma-record-v1:` followed by the record's content hash (SHA-256 hex of its canonical JSON, which "
    "leaves the attestation out); runners sign what they emit, `luma runner sign` signs record files. Ingest "
    "checks it against the keys this project trusts (`luma runner trust`)."
)

Fingerprint = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{32}$",
                                         description="Lower-case hex of the first 16 bytes of SHA-256 of the "
                                                     "signer's raw 32-byte Ed25519 public key.")]


def strict_b64(text: str, size: int) -> bytes:
    """The bytes of canonical base64 `text` that decode to exactly `size` bytes; ValueError otherwise."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not base64") from None
    if len(raw) != size:
        raise ValueError(f"must decode to {size} bytes, got {len(raw)}")
    if base64.b64encode(raw).decode() != text:
        raise ValueError("is not canonical base64")  # one signature, one spelling
    return raw


class Attestation(BaseModel):
    """Who vouches for a record: the runner key's fingerprint and its Ed25519 signature over
    `luma-record-v1:` + the record's content hash (the hash leaves this block out)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    key: Fingerprint
    algorithm: Literal["ed25519"]
    signature: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9+/]{86}==$",
                                          description="Base64 of the 64-byte Ed25519 signature.")]

    @field_validator("signature")
    @classmethod
    def _signature(cls, text: str) -> str:
        strict_b64(text, 64)
        return text


# -- keys and signatures ----------------------------------------------------------------------


def generate():
    """A new Ed25519 private key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def public_bytes(private_key) -> bytes:
    """The raw 32-byte public key of a private key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def fingerprint(public_key_bytes: bytes) -> str:
    """A key's identity: lower-case hex of the first 16 bytes of SHA-256 of the raw public key."""
    return hashlib.sha256(public_key_bytes).hexdigest()[:32]


def message(content_hash: str) -> bytes:
    """The bytes a record signature covers."""
    if not isinstance(content_hash, str) or not _HASH.match(content_hash):
        raise ValueError(f"not a content hash (64 lower-case hex digits): {content_hash!r}")
    return DOMAIN + content_hash.encode()


def sign(private_key, content_hash: str) -> Attestation:
    """The attestation of the record whose content hash is `content_hash`."""
    signature = private_key.sign(message(content_hash))
    return Attestation(key=fingerprint(public_bytes(private_key)), algorithm=ALGORITHM,
                       signature=base64.b64encode(signature).decode())


def verify(attestation: Attestation, content_hash: str, public_key_bytes: bytes) -> bool:
    """Whether `attestation` is a valid signature by that public key over that content hash.
    False on any mismatch (another key, another hash, a bad signature or key); never raises for them."""
    from cryptography.exceptions import InvalidSignature

    try:
        if attestation.algorithm != ALGORITHM or attestation.key != fingerprint(public_key_bytes):
            return False
        _public_key(public_key_bytes).verify(strict_b64(attestation.signature, 64), message(content_hash))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


@lru_cache(maxsize=256)
def _public_key(raw: bytes):
    # A project has a few keys and ingest verifies many records with each.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return Ed25519PublicKey.from_public_bytes(raw)


def public_key_text(public_key_bytes: bytes) -> str:
    """How a public key is written (a .pub file, a runner-trust record, `luma runner trust`)."""
    return base64.b64encode(public_key_bytes).decode()


def parse_public_key(text: str, source: str) -> bytes:
    """Raw 32-byte public key from base64 (of the raw key) or a PEM `PUBLIC KEY`; RecordError naming `source`."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key

        try:
            key = load_pem_public_key(text.encode())
        except (ValueError, TypeError):
            raise RecordError("is not a PEM public key", source=source) from None
        if not isinstance(key, Ed25519PublicKey):
            raise RecordError("is not an Ed25519 public key", source=source)
        return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    try:
        return strict_b64(text, 32)
    except ValueError as exc:
        raise RecordError(f"public key {exc} (give base64 of the raw 32-byte Ed25519 key, or a .pub file)",
                          source=source) from None


# -- key files ----------------------------------------------------------------------------------


def keys_dir(home: Path) -> Path:
    return Path(home) / KEYS


def check_name(name: str) -> str:
    # A key name is a file name under keys/ (luma/names.py), and lower-case: it is also an IRI's.
    if not isinstance(name, str) or not NAME.match(name) or names.problem(name):
        raise TrustError(f"a key name is a slug (lower-case letters, digits, '.', '_' or '-', no '..', at most "
                          f"64), got {name[:80]!r}", source="runner key")
    return name


def key_names(home: Path) -> list[str]:
    """Names of the private keys under `$LUMA_HOME/keys/`."""
    folder = keys_dir(home)
    return sorted(p.stem for p in folder.glob("*.key") if NAME.match(p.stem)) if folder.is_dir() else []


def write_keypair(home: Path, name: str, private_key) -> tuple[Path, Path]:
    """Write `NAME.key` (PKCS8 PEM) and `NAME.pub`, both mode 0600; refuse to overwrite either.
    The private key appears under its name complete or not at all (written beside it, then linked)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    check_name(name)
    folder = keys_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    key, pub = folder / f"{name}.key", folder / f"{name}.pub"
    for path in (key, pub):
        if os.path.lexists(path):
            raise _exists(path)
    pem = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    tmp = folder / f".{name}.key.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)  # left by a killed process that had our pid
    _write_new(tmp, pem, 0o600)
    try:
        os.link(tmp, key)  # fails if another process made the key meanwhile
    except FileExistsError:
        raise _exists(key) from None
    finally:
        tmp.unlink()
    try:
        # Public, but inside the project: owner-only like everything there (luma/privacy.py);
        # `luma runner keygen` prints its path for the user to hand on.
        _write_new(pub, (public_key_text(public_bytes(private_key)) + "\n").encode(), 0o600)
    except FileExistsError:
        key.unlink()  # ours: the pair goes together or not at all
        raise _exists(pub) from None
    return key, pub


def _exists(path: Path) -> ConfigError:
    return TrustError("exists already; a key is never overwritten (choose another name)", source=str(path),
                       field="name")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: never through an existing file or link; the mode is set at creation, not after.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def load_private(home: Path, name: str):
    """The private key `NAME.key`; ConfigError naming the file when it is missing, not a regular
    file, readable or writable by group or others, or not an Ed25519 PKCS8 key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    path = keys_dir(home) / f"{check_name(name)}.key"
    data = _read_own_file(path)
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise TrustError("is not an unencrypted PKCS8 PEM private key", source=str(path)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise TrustError("is not an Ed25519 private key", source=str(path))
    return key


def _read_own_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise TrustError("no such key (`luma runner keygen` makes one)", source=str(path)) from None
    except OSError as exc:
        raise TrustError(f"cannot open: {exc.strerror}", source=str(path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TrustError("is not a regular file", source=str(path))
        if st.st_mode & 0o077:
            raise TrustError(f"is accessible by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
                              "a private key must be mode 0600 (chmod 600 it)", source=str(path))
        data = os.read(fd, _KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _KEY_FILE_BYTES:
        raise TrustError("is too large to be a key", source=str(path))
    return data


def load_public(home: Path, name: str) -> bytes:
    """The raw public key of key NAME (from its private key, which is the authority)."""
    return public_bytes(load_private(home, name))


def default_key(home: Path, name: str | None = None) -> str | None:
    """The name of the key runners sign with: `name` (LUMA_RUNNER_KEY) when given, else the one
    `keys/default` names (the key `luma runner keygen` made first); None when there is none."""
    if name:
        return check_name(name)
    marker = keys_dir(home) / "default"
    if not marker.is_file():
        return None
    text = marker.read_text(errors="replace").strip()
    if not NAME.match(text):
        raise TrustError(f"names no key ({text[:64]!r})", source=str(marker))
    return text


def set_default(home: Path, name: str) -> None:
    """Make key NAME the one runners sign with."""
    marker = keys_dir(home) / "default"
    tmp = marker.with_name(f".default.{os.getpid()}.tmp")
    tmp.write_text(check_name(name) + "\n")
    os.replace(tmp, marker)

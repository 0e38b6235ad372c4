"""`luma runner`: runner keys -- keygen, trust, list, revoke -- and signing record files."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.output import format_option, print_rows, slug_callback
from luma.cli.submitter import submitter_option
from luma.cli.project import NONE, READ, WRITE, project, require, settings, settings as command_settings
from luma.errors import ConfigError
from luma.kb.trust import attestation
from luma.kb.trust.attestation import parse_public_key
from luma.kb.records.input_files import PARTNER_FILE, read_text
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger import Ledger
from luma.kb.operations.runner_keys import keygen, revoke, suggested_name, trust
from luma.kb.trust.runners import signer, trusted_keys
from luma.kb.records.signed_files import sign_files

_COLUMNS = ["name", "fingerprint", "partner", "since", "revoked"]


def _open():
    return KnowledgeBase.open(settings())


@click.command("keygen")
@click.option("--name", callback=slug_callback, help="The key's name (default: user@host as a slug).")
@submitter_option()
@project(WRITE)
def keygen_cmd(name: str | None, submitter: str | None) -> None:
    """Make an Ed25519 key pair under $LUMA_HOME/keys/ (private key mode 0600, never printed)
    and trust it in this project. The first key is the one runners sign with."""
    with _open() as kb:
        key = keygen(kb, name, submitter)
        home = kb.settings.home
    click.echo(f"runner key {key.name}: fingerprint {key.fingerprint}, trusted by this project")
    click.echo(f"public key: {attestation.keys_dir(home) / key.name}.pub (give it to projects that should trust "
               f"this runner: `luma runner trust {key.name}.pub --name {suggested_name(key.name, key.fingerprint)}`)")


@click.command("trust")
@click.argument("pubkey", metavar="PUBKEY")
@click.option("--name", required=True, callback=slug_callback, help="What to call the runner (a slug).")
@click.option("--partner", callback=slug_callback, help="The partner lab the key belongs to.")
@submitter_option()
@project(WRITE)
def trust_cmd(pubkey: str, name: str, partner: str | None, submitter: str | None) -> None:
    """Trust the runner key PUBKEY: base64 of the raw 32-byte Ed25519 public key, or a file
    holding it (a .pub file from `luma runner keygen`, or a PEM public key)."""
    key = _public_key(pubkey)
    with _open() as kb:
        trusted = trust(kb, key, name, partner, submitter)
    click.echo(f"trusted runner {trusted.name} ({trusted.fingerprint})"
               + (f" of partner {trusted.partner}" if trusted.partner else ""))


def _public_key(text: str) -> bytes:
    """Raw public key from PUBKEY: a file when one of that name exists, else base64 text. The
    file is read as untrusted, within the partner file limit (it is usually a partner lab's)."""
    path = Path(text)
    if text.endswith(".pub") or path.exists():
        return parse_public_key(read_text(path, PARTNER_FILE), str(path))
    return parse_public_key(text, "PUBKEY")


@click.command("list")
@format_option()
@project(READ)
def list_cmd(fmt: str) -> None:
    """Every runner key this project has trusted: name, fingerprint, partner, since, revoked."""
    ledger = Ledger(require().db_url)  # reading creates nothing: no project is an error
    try:
        keys = trusted_keys(ledger)
    finally:
        ledger.dispose()
    ordered = sorted(keys.values(), key=lambda k: (k.trusted_since, k.name))
    if fmt == "table":
        rows = [{**k.row(), "since": f"{k.trusted_since:%Y-%m-%d %H:%M}Z",
                 "revoked": f"{k.revoked_at:%Y-%m-%d %H:%M}Z" if k.revoked else ""} for k in ordered]
        print_rows(rows, _COLUMNS, fmt, title="runner keys")
        return
    print_rows([k.row() for k in ordered], [*_COLUMNS, "reason"], fmt)


@click.command("revoke")
@click.argument("name")
@click.option("--reason", help="Why (kept in the revocation record).")
@submitter_option("Who revokes (default: user@host).")
@project(READ)
def revoke_cmd(name: str, reason: str | None, submitter: str | None) -> None:
    """Stop trusting runner key NAME (or fingerprint). The ledger keeps its records; they stop
    qualifying as measured at the next `luma rules run`."""
    require()  # nothing to revoke in a project that does not exist
    with _open() as kb:
        key = revoke(kb, name, reason, submitter)
        home = kb.settings.home
    click.echo(f"revoked runner {key.name} ({key.fingerprint}) on {key.revoked_at:%Y-%m-%d %H:%M}Z")
    if attestation.default_key(home) == key.name:
        click.echo("it was this project's signing key: `luma runner keygen --name NEW` makes a new one", err=True)


@click.command("sign")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", "key_name", callback=slug_callback, help="Sign with this key of $LUMA_HOME/keys/ (default: the "
                                                         "project's signing key, or LUMA_RUNNER_KEY's).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write the signed copies into this folder (default: in place).")
@format_option()
@project(NONE)
def sign_cmd(files: tuple[Path, ...], key_name: str | None, out: Path | None, fmt: str) -> None:
    """Sign every record of FILES (JSON, JSON Lines, YAML) over its content hash, adding an
    attestation block. Every record is validated first; any error names the file and field,
    and nothing is written."""
    settings = command_settings()
    name = key_name or attestation.default_key(settings.home, settings.runner_key)
    if name is None:
        raise ConfigError("this project has no runner key (`luma runner keygen` makes one)", source="--key")
    s = signer(settings.home, name)
    written = sign_files(list(files), s, out)
    rows = [{"file": str(path), "records": n, "key": s.name, "fingerprint": s.fingerprint} for path, n in written]
    if fmt == "table":
        click.echo(f"signed {sum(n for _, n in written)} record(s) in {len(written)} file(s) with key {s.name} "
                   f"({s.fingerprint})")
        for row in rows:
            click.echo(f"  {row['file']}: {row['records']}")
    else:
        print_rows(rows, ["file", "records", "key", "fingerprint"], fmt)



"""The curated catalog: about a dozen good small chat models, and a few embedding models for
knowledge collections (tag "embedding"), with the GGUF files we recommend, shipped in
resources/catalog.json so that it can be browsed offline. Qt-free.

The file is validated strictly (unknown keys too, so that a typo cannot hide a field): a broken
catalog raises CatalogError, which the Models dialog shows instead of the list.

Each entry says when its file names were last checked and against what: "hub" (the repository's
listing had every recommended file) or "naming" (written from the publisher's naming without the
Hub). `python -m inglenook.models.catalog` asks the Hub (HF_ENDPOINT) about every entry; with
`--write` it stamps the entries it confirmed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inglenook import paths
from inglenook.models import hub
from inglenook.models.filenames import is_safe

CATALOG_FORMAT = 2  # 2: entries say when and how their file names were checked
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_PARAMS = re.compile(r"^\d+(?:\.\d+)?[MB]$")
_TEXT = ("repo", "name", "publisher", "params", "licence", "description")
_FIELDS = {*_TEXT, "context", "recommended", "tags", "checked"}
_CHECKED_FIELDS = {"date", "against"}
CheckedAgainst = Literal["hub", "naming"]


class CatalogError(ValueError):
    """The catalog file is missing or malformed; the message says where."""


@dataclass(frozen=True)
class CatalogEntry:
    repo: str  # "owner/name" on the Hub
    name: str  # for people: "Qwen2.5 1.5B Instruct"
    publisher: str  # who made the model (not who converted it to GGUF)
    params: str  # "1.5B"
    context: int  # trained context length, tokens
    licence: str
    description: str  # one sentence
    recommended: tuple[str, ...]  # GGUF file names in the repository, the recommended one first
    tags: tuple[str, ...]
    checked: datetime.date | None = None  # when the file names were last checked...
    checked_against: CheckedAgainst = "naming"  # ...and against what (see the docstring)

    @property
    def is_embedding(self) -> bool:
        """An embedding model (for Knowledge), not a chat model."""
        return "embedding" in self.tags

    @property
    def default_file(self) -> str:
        return self.recommended[0]


def catalog_path() -> Path:
    return paths.resources_dir() / "catalog.json"


def load_catalog(path: Path | None = None) -> list[CatalogEntry]:
    """The catalog's entries in file order; CatalogError if the file is missing or malformed."""
    path = path or catalog_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"The model catalog {path} is missing.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"Cannot read the model catalog {path}: {e}.") from None
    except json.JSONDecodeError as e:
        raise CatalogError(f"The model catalog {path} is not valid JSON: {e}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise CatalogError(f"The model catalog {path} has no list of models.")
    if data.get("format") != CATALOG_FORMAT:
        raise CatalogError(f"The model catalog {path} is in format {data.get('format')!r}; "
                           f"this version of Inglenook reads format {CATALOG_FORMAT}.")
    entries: list[CatalogEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(data["models"]):
        entry = _entry(item, f"{path.name}, model #{i + 1}")
        if entry.repo.lower() in seen:
            raise CatalogError(f"The model catalog lists {entry.repo} twice.")
        seen.add(entry.repo.lower())
        entries.append(entry)
    return entries


def _entry(item: object, where: str) -> CatalogEntry:
    if not isinstance(item, dict):
        raise CatalogError(f"{where} is not an object.")
    missing = _FIELDS - item.keys()
    unknown = item.keys() - _FIELDS
    if missing or unknown:
        detail = "; ".join(filter(None, [
            f"missing {', '.join(sorted(missing))}" if missing else "",
            f"unknown {', '.join(sorted(unknown))}" if unknown else ""]))
        raise CatalogError(f"{where}: {detail}.")
    for key in _TEXT:
        if not isinstance(item[key], str) or not item[key].strip():
            raise CatalogError(f"{where}: {key} must be a non-empty string.")
    repo = item["repo"]
    where = f"{where} ({repo})"
    if not _REPO.match(repo) or ".." in repo:
        raise CatalogError(f"{where}: the repository is not like 'owner/name'.")
    if not _PARAMS.match(item["params"]):
        raise CatalogError(f"{where}: params must read like '1.5B' or '360M'.")
    context = item["context"]
    if not isinstance(context, int) or isinstance(context, bool) or context <= 0:
        raise CatalogError(f"{where}: context must be a positive number of tokens.")
    recommended = _strings(item["recommended"], f"{where}: recommended")
    if not recommended:
        raise CatalogError(f"{where}: recommended must name at least one file.")
    for name in recommended:
        if not is_safe(name):
            raise CatalogError(f"{where}: {name!r} is not a safe .gguf file name.")
    if len(set(recommended)) != len(recommended):
        raise CatalogError(f"{where}: a recommended file is listed twice.")
    checked, against = _checked(item["checked"], f"{where}: checked")
    return CatalogEntry(
        repo=repo, name=item["name"].strip(), publisher=item["publisher"].strip(),
        params=item["params"], context=context, licence=item["licence"].strip(),
        description=item["description"].strip(), recommended=recommended,
        tags=_strings(item["tags"], f"{where}: tags"), checked=checked,
        checked_against=against)


def _checked(value: object, where: str) -> tuple[datetime.date, CheckedAgainst]:
    if not isinstance(value, dict) or value.keys() != _CHECKED_FIELDS:
        raise CatalogError(f"{where} must be {{\"date\": \"YYYY-MM-DD\", \"against\": "
                           "\"hub\" or \"naming\"}.")
    try:
        date = datetime.date.fromisoformat(value["date"])
    except (TypeError, ValueError):
        raise CatalogError(f"{where}: the date must read like 2026-12-01.") from None
    against = value["against"]
    if against not in ("hub", "naming"):
        raise CatalogError(f"{where}: against must be \"hub\" or \"naming\".")
    return date, against


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CatalogError(f"{where} must be a list of non-empty strings.")
    return tuple(value)


# -- checking the file names against the Hub ------------------------------------------------------
def missing_files(entry: CatalogEntry) -> list[str]:
    """The entry's recommended files that its repository does not have (network; raises
    hub.HubError when the repository cannot be listed)."""
    have = {f.path for m in hub.list_gguf_files(entry.repo).models for f in m.parts}
    return [name for name in entry.recommended if name not in have]


def stamp(path: Path, confirmed: set[str], today: datetime.date) -> None:
    """Mark the entries of `confirmed` repositories as checked against the Hub today."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for item in data["models"]:
        if item["repo"] in confirmed:
            item["checked"] = {"date": today.isoformat(), "against": "hub"}
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Check every entry's files on the Hub; 0 when all were found."""
    parser = argparse.ArgumentParser(prog="python -m inglenook.models.catalog",
                                     description="Check the catalog's file names on the Hub.")
    parser.add_argument("--write", action="store_true",
                        help="stamp the entries whose files were all found")
    parser.add_argument("--catalog", type=Path, default=None)
    args = parser.parse_args(argv)
    path = args.catalog or catalog_path()
    confirmed: set[str] = set()
    for entry in load_catalog(path):
        try:
            missing = missing_files(entry)
        except hub.HubError as exc:
            print(f"{entry.repo}: cannot list it: {exc}")
            continue
        if missing:
            print(f"{entry.repo}: missing {', '.join(missing)}")
        else:
            confirmed.add(entry.repo)
            print(f"{entry.repo}: ok")
    if args.write and confirmed:
        stamp(path, confirmed, datetime.datetime.now(datetime.UTC).date())
    return 0 if len(confirmed) == len(load_catalog(path)) else 1


if __name__ == "__main__":
    sys.exit(main())

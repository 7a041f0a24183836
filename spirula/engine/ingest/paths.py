"""Finding the file a dataset names, and saying so when more than one could be it.

A name is looked up by these rules, in this order; the first rule that finds a file wins
(later rules are not tried), so a file named exactly as written always wins:

1. ``as written``: relative to the dataset's folder (or absolute), with ``\\`` read as
   ``/`` (files written on Windows) and ``file://`` URLs decoded, in either Unicode
   normal form (macOS writes NFD).
2. ``extension added``: the name plus an image extension, in the order of
   :data:`EXTENSIONS` (NeRF-synthetic writes names without one).
3. ``letter case``: a file in the named folder whose name differs only in letter case
   (a dataset written on macOS or Windows, read on a case-sensitive file system), with
   or without an added extension.
4. ``trailing components``: the name's last components under the dataset's folder,
   longest first (``images/0001.jpg``, then ``0001.jpg``), each by rules 1-3 (a path from
   another machine).

When one rule finds several different files -- ``a.png`` and ``a.jpg`` for ``a``;
``A.JPG`` and ``a.jpg`` for ``a.jpg``; the NFC and the NFD spelling of one name;
``images/0001.jpg`` and ``0001.jpg`` -- the first in the rule's order is used (the
extension order of :data:`EXTENSIONS`, then names sorted; the longest trailing path), and
:attr:`Found.others` lists the rest so that the reader's warning names the file taken,
the ones passed over, and the rule.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

EXTENSIONS = (".png", ".jpg", ".jpeg", ".exr", ".webp", ".tif", ".tiff", ".bmp")
RULES = ("as written", "extension added", "letter case", "trailing components")


@dataclass(frozen=True)
class Found:
    """The file for a name: ``path`` (exists), the ``rule`` of :data:`RULES` that found
    it, and the other files that rule also found (``others``; empty when unambiguous)."""

    path: Path
    rule: str
    others: tuple[Path, ...] = ()

    def ambiguity(self, name: str, base: Path) -> str | None:
        """'name -> taken (also: x, y; rule)' for a warning, or None when unambiguous."""
        if not self.others:
            return None
        rel = [relative_name(p, base) for p in (self.path, *self.others)]
        return f"{name} -> {rel[0]} (also {', '.join(rel[1:])}; by {self.rule})"


@dataclass
class Finder:
    """Looks names up under ``base`` by the module's rules; caches folder listings."""

    base: Path
    extensions: tuple[str, ...] = EXTENSIONS
    _listings: dict[Path, dict[str, list[str]]] = field(default_factory=dict)

    def find(self, name: str) -> Found | None:
        raw = name.strip()
        variants = [raw]
        if "\\" in raw:
            variants.append(raw.replace("\\", "/"))
        if raw.startswith("file://"):
            from urllib.parse import unquote

            variants.append(unquote(raw[len("file://"):]))
        paths = []
        for v in variants:
            p = Path(v)
            paths.append(Path(os.path.abspath(p if p.is_absolute() else self.base / p)))
        hit = self._by_rules(paths)
        if hit is not None:
            return hit
        parts = [q for q in re.split(r"[\\/]+", raw) if q not in ("", ".", "..") and not re.fullmatch(r"[A-Za-z]:", q)]
        found = [f for k in range(len(parts) - 1, 0, -1) if (f := self._by_rules([self.base.joinpath(*parts[-k:])]))]
        if not found:
            return None
        every = _distinct([p for f in found for p in (f.path, *f.others)])
        return Found(every[0], RULES[3], tuple(every[1:]))

    def _by_rules(self, paths: list[Path]) -> Found | None:
        for rule, hits in ((RULES[0], self._as_written(paths)), (RULES[1], self._with_extension(paths)),
                           (RULES[2], self._other_case(paths))):
            hits = _distinct(hits)
            if hits:
                return Found(hits[0], rule, tuple(hits[1:]))
        return None

    def _as_written(self, paths: list[Path]) -> list[Path]:
        return [q for p in paths for q in _forms(p) if _is_file(q)]

    def _with_extension(self, paths: list[Path]) -> list[Path]:
        return [Path(f"{q}{ext}") for p in paths for ext in self.extensions for q in _forms(p)
                if _is_file(Path(f"{q}{ext}"))]

    def _other_case(self, paths: list[Path]) -> list[Path]:
        out = []
        for p in paths:
            listing = self._listing(p.parent)
            keys = [_key(p.name)] + [_key(p.name + ext) for ext in self.extensions]
            for k in keys:
                out += [p.parent / n for n in sorted(listing.get(k, []))]
        return [q for q in out if _is_file(q)]

    def _listing(self, folder: Path) -> dict[str, list[str]]:
        if folder not in self._listings:
            table: dict[str, list[str]] = {}
            try:
                for entry in os.scandir(folder):
                    table.setdefault(_key(entry.name), []).append(entry.name)
            except (OSError, ValueError):
                pass
            self._listings[folder] = table
        return self._listings[folder]


def _distinct(paths: list[Path]) -> list[Path]:
    """``paths`` without repeats of one file (one file under two spellings, on a file
    system that ignores case or Unicode normalisation, counts once)."""
    seen, out = set(), []
    for p in paths:
        try:
            st = p.stat()
            ident = (st.st_dev, st.st_ino)
        except OSError:
            ident = str(p)
        if ident not in seen:
            seen.add(ident)
            out.append(p)
    return out


def _key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _forms(p: Path) -> list[Path]:
    out = [p]
    for form in ("NFC", "NFD"):
        q = Path(unicodedata.normalize(form, str(p)))
        if q not in out:
            out.append(q)
    return out


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (ValueError, OSError):  # NUL byte, name too long
        return False


def relative_name(p: Path, base: Path) -> str:
    """``p`` relative to ``base`` (posix), or in full when outside it."""
    try:
        return p.relative_to(base).as_posix()
    except ValueError:
        return str(p)


def ambiguity_warning(where: object, notes: list[str]) -> str:
    """The one warning of a reader about names that matched several files."""
    more = f" ... and {len(notes) - 10} more" if len(notes) > 10 else ""
    many = len(notes) > 1
    return (f"{len(notes)} image name{'s' if many else ''} in {where} match{'' if many else 'es'} more than one file; "
            f"the first by the lookup rules is used (README, 'Bad input'): {'; '.join(notes[:10])}{more}")


def expected_and_found(expected: list[str], found: list[str], where: str, k: int = 3) -> str:
    """'expected a, b, c (of N); found in <where>: x, y, z (of M)' -- the first few names
    a dataset lists and the first few image files there, so that a naming mismatch (a
    prefix, a sub-folder, an extension) shows at once."""
    def few(names: list[str]) -> str:
        names = sorted(names)
        return ", ".join(names[:k]) + (f" (of {len(names)})" if len(names) > k else "")
    seen = f"found in {where}: {few(found)}" if found else f"{where} holds no image file"
    return f"expected {few(expected)}; {seen}"

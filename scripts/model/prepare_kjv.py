#!/usr/bin/env python3
"""Writes the King James Bible as plain text for training the embedded model.

The text comes from Debian's `bible` program (package bible-kjv, data in
bible-kjv-text). Output: one verse per line with no book, chapter or verse
numbers, and an empty line between chapters, so that the training script can
treat each chapter as one document.

Usage: python3 scripts/model/prepare_kjv.py [OUT]   (default .data/kjv.txt)
"""
import re
import subprocess
import sys
from pathlib import Path

VERSE = re.compile(r"^\s+\d+ (.*)$")
CHAPTER = re.compile(r"^\S.* \d+$")  # "Genesis 1", "1 Kings 3", "Song of Solomon 2"


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".data/kjv.txt")
    # A very wide line length keeps every verse on one line; the verse range
    # covers the whole book from Genesis 1:1 to Revelation 22:21.
    raw = subprocess.run(
        ["bible", "-l100000", "Gen1:1-Rev22:21"],
        check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    ).stdout
    chapters: list[list[str]] = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        verse = VERSE.match(line)
        if verse:
            chapters[-1].append(" ".join(verse.group(1).split()))
        elif CHAPTER.match(line):
            chapters.append([])
        else:
            raise SystemExit(f"unexpected line from bible: {line!r}")
    verses = sum(len(c) for c in chapters)
    if len(chapters) != 1189 or verses != 31102:
        raise SystemExit(f"expected 1189 chapters and 31102 verses, got {len(chapters)} and {verses}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n\n".join("\n".join(c) for c in chapters) + "\n", encoding="utf-8")
    print(f"{out}: {len(chapters)} chapters, {verses} verses, {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()

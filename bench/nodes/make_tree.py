#!/usr/bin/env python3
"""Writes a deterministic source-like tree of ENTRIES entries: 110 folders (10 packages
of 10 modules) and ENTRIES - 110 text files of 1 to 6 KiB spread over the modules, made
of code-like lines from a fixed vocabulary and a fixed seed, so every run makes the same
bytes and gzip finds the repetition real source has.

Usage: make_tree.py DIR ENTRIES
"""

import os
import random
import sys

WORDS = (
    "fn let mut match if else return struct impl pub use self Some None Ok Err "
    "value path node stream frame bytes size limit error reader writer buffer "
    "config state link call result head body check open close read write"
).split()
EXTENSIONS = (".rs", ".py", ".md", ".toml", ".js", ".txt")


def line(rng):
    indent = "    " * rng.randint(0, 3)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
    return f"{indent}{words};\n"


def main():
    root, entries = sys.argv[1], int(sys.argv[2])
    folders = [os.path.join(root, f"pkg{p}", f"mod{m}") for p in range(10) for m in range(10)]
    for folder in folders:
        os.makedirs(folder)
    rng = random.Random(10)
    for index in range(entries - 110):
        folder = folders[index % len(folders)]
        target = rng.randint(1024, 6 * 1024)
        text = []
        size = 0
        while size < target:
            text.append(line(rng))
            size += len(text[-1])
        name = f"file{index:05d}{EXTENSIONS[index % len(EXTENSIONS)]}"
        with open(os.path.join(folder, name), "w") as out:
            out.write("".join(text))


if __name__ == "__main__":
    main()

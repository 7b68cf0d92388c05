#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the README and docs/: the README is at most 200 lines, every page under docs/ is
linked from it, every relative link of every page resolves to a file, and every fenced block
marked runnable still runs.

A block is runnable when the line before its opening fence is `<!-- ci: run -->`: a ```sh block
runs under bash -euo pipefail, a ```python block under python3 (with PYTHONPATH=build/python).
The runnable blocks of one page run in order in one scratch folder, where build/ is the build
tree and apps/, examples/ and scripts/ are the source tree's, so a block can use the files an
earlier block of the same page wrote. (`<!-- ci: FILE -->` markers name example files that the
installed-package test extracts; they are not run here.)

    python3 scripts/check_docs.py --source . --build build [--python python3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MAX_README_LINES = 200
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\s*$")


def runnable_blocks(text):
    """(line, language, code) of every block after a `<!-- ci: run -->` line."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "<!-- ci: run -->":
            opening = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
            if opening is None:
                blocks.append((i + 1, None, "the marker is not followed by a fenced block"))
                i += 1
                continue
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append((i + 2, opening.group(1), "\n".join(lines[i + 2:end]) + "\n"))
            i = end
        i += 1
    return blocks


def check_links(page, text, problems):
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            problems.append(f"{page}: link to {target}: no such file")


def run_blocks(page, blocks, opts, problems):
    if not blocks:
        return 0
    source, build = Path(opts.source).resolve(), Path(opts.build).resolve()
    with tempfile.TemporaryDirectory(prefix="tessera-docs-") as scratch:
        for name, target in (("build", build), ("apps", source / "apps"),
                             ("examples", source / "examples"), ("scripts", source / "scripts")):
            os.symlink(target, Path(scratch) / name)
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONPATH=str(build / "python"))
        for line, language, code in blocks:
            where = f"{page}:{line}"
            if language not in ("sh", "python"):
                problems.append(f"{where}: runnable blocks are ```sh or ```python, not "
                                f"'{language}' ({code if language is None else ''})")
                continue
            command = (["bash", "-euo", "pipefail", "-c", code] if language == "sh"
                       else [opts.python, "-c", code])
            try:
                done = subprocess.run(command, cwd=scratch, env=env, capture_output=True,
                                      text=True, timeout=opts.timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"{where}: still running after {opts.timeout} s")
                continue
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
            print(f"{where}: {language} block: {status}")
            if done.returncode != 0:
                problems.append(f"{where}: the {language} block exited {done.returncode}:\n"
                                f"{code}--- output:\n{done.stdout}{done.stderr}")
    return len(blocks)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--timeout", type=float, default=300.0)
    opts = p.parse_args()
    source = Path(opts.source).resolve()
    readme = source / "README.md"
    pages = [readme] + sorted((source / "docs").glob("**/*.md"))
    problems = []
    readme_text = readme.read_text()
    lines = len(readme_text.splitlines())
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines, at most {MAX_README_LINES}")
    linked = {(readme.parent / t.split("#")[0]).resolve() for t in LINK.findall(readme_text)}
    for page in sorted((source / "docs").glob("*.md")):
        if page.resolve() not in linked:
            problems.append(f"README.md does not link {page.relative_to(source)}")
    ran = 0
    for page in pages:
        text = page.read_text()
        check_links(page, text, problems)
        ran += run_blocks(page.relative_to(source), runnable_blocks(text), opts, problems)
    print(f"{len(pages)} pages, README {lines} lines, {ran} runnable blocks")
    for problem in problems:
        print("PROBLEM:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

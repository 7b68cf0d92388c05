#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks every #include of the tree against the part graph in cmake/layering.txt.

  scripts/check_layering.py [ROOT]

A part is a top-level folder (core, comm, engine, ...; `include` is include/tessera, whose
headers are included as "tessera/..."). A file of part P may include its own part's headers
and those of every part P builds on, directly or through others; project headers are included
by their path from the root ("comm/codec.h"), never with "..". Prints one line per violation
(file:line, the include, what the part may see) and exits 1 when there is any; 0 otherwise.
"""
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def read_table(path):
    """{part: set of parts it may include} (transitive closure, itself included)."""
    deps, order = {}, []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = re.fullmatch(r"([a-z_]+):(.*)", line)
            if not match:
                sys.exit(f"{path}:{number}: expected 'part: deps ...', got '{line}'")
            part, listed = match.group(1), match.group(2).split()
            if part in deps:
                sys.exit(f"{path}:{number}: part '{part}' is listed twice")
            for dep in listed:
                if dep not in deps:
                    sys.exit(f"{path}:{number}: {part} builds on '{dep}', which is not listed "
                             "above it (parts are listed lowest first, so the graph has no cycle)")
            deps[part] = set(listed)
            order.append(part)
    closure = {}
    for part in order:
        visible = {part}
        for dep in deps[part]:
            visible |= closure[dep]
        closure[part] = visible
    return closure


def part_of_include(target):
    """The part an include path names, or None for a non-project header."""
    first = target.split("/", 1)[0]
    return "include" if first == "tessera" else first


def folder_of_part(part):
    return os.path.join("include", "tessera") if part == "include" else part


def check(root):
    closure = read_table(os.path.join(root, "cmake", "layering.txt"))
    problems = []
    for part in sorted(closure):
        top = os.path.join(root, folder_of_part(part))
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                problems += check_file(root, path, part, closure)
    return problems


def check_file(root, path, part, closure):
    problems = []
    relative = os.path.relpath(path, root)
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            bracket, target = match.groups()
            closing = '"' if bracket == '"' else ">"
            where = f"{relative}:{number}: #include {bracket}{target}{closing}"
            if ".." in target.split("/"):
                problems.append(f"{where}: project headers are included by their path from the "
                                "root, not with '..'")
                continue
            if "/" not in target:
                # A bare name: a header beside the file (same part), or a system header.
                continue
            used = part_of_include(target)
            if used not in closure:
                continue  # not a project part: a third-party or system header
            if not os.path.exists(os.path.join(root, folder_of_part(used),
                                               target.split("/", 1)[1])):
                continue  # e.g. <tessera/...> of an installed package in examples/
            if used not in closure[part]:
                visible = ", ".join(sorted(closure[part]))
                problems.append(f"{where}: part '{part}' may not include part '{used}' "
                                f"(cmake/layering.txt: {part} sees {visible})")
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include(s) outside the part graph of cmake/layering.txt")
        return 1
    print("every #include follows cmake/layering.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())

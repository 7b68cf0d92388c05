#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/check_layering.py catches what it guards: the real tree passes; a copy with a
forbidden include planted (a lower part including a higher one, a '..' path, an include of a
part that is no dependency) fails naming the file and line; a table with a cycle is refused."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1])
CHECKER = os.path.join(ROOT, "scripts", "check_layering.py")
failures = []
checks = 0


def run(root):
    done = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def expect(condition, what, output):
    global checks
    checks += 1
    if not condition:
        failures.append(f"{what}\n{output}")


def copy_tree():
    work = tempfile.mkdtemp(prefix="layering-")
    for name in os.listdir(ROOT):
        source = os.path.join(ROOT, name)
        if name.startswith(".") or name.startswith("build") or not os.path.isdir(source):
            continue
        shutil.copytree(source, os.path.join(work, name), symlinks=True,
                        ignore=shutil.ignore_patterns("build*", "*.png", "*.json", "*.csv"))
    return work


def plant(root, path, line):
    with open(os.path.join(root, path)) as f:
        text = f.read()
    with open(os.path.join(root, path), "w") as f:
        f.write(line + "\n" + text)


code, out = run(ROOT)
expect(code == 0, "the tree itself should pass", out)

for path, line, message in [
        ("partition/graph_part.cc", '#include "engine/trainer.h"',
         "part 'partition' may not include part 'engine'"),
        ("core/tensor.h", '#include "comm/communicator.h"', "part 'core' may not include part 'comm'"),
        ("layers/model.cc", '#include "partition/graph_part.h"',
         "part 'layers' may not include part 'partition'"),
        ("comm/codec.cc", '#include "../engine/trainer.h"', "not with '..'"),
        ("engine/trainer.cc", '#include <tessera/session.h>', None)]:
    work = copy_tree()
    plant(work, path, line)
    code, out = run(work)
    if message is None:  # engine may include the public headers: not a violation
        expect(code == 0, f"{line} in {path} is allowed by the table", out)
    else:
        expect(code == 1 and f"{path}:1:" in out and message in out,
               f"planting {line} in {path} should fail naming {path}:1 and '{message}'", out)
    shutil.rmtree(work)

work = copy_tree()
with open(os.path.join(work, "cmake", "layering.txt"), "a") as f:
    f.write("core: engine\n")  # engine is listed above: core would now build on it, a cycle
code, out = run(work)
expect(code != 0 and "core" in out, "a cycle in the table should be refused", out)
shutil.rmtree(work)

for failure in failures:
    print("FAILED:", failure)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)

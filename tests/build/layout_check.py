"""The tree's layout rules (docs/developing.md, "The map"), checked from the files alone:

  includes   a folder of library code includes only its own headers and those of the folders
             below it (LAYERS: each folder's direct floor; what those may include, it may too);
  targets    every folder of C or C++ sources is exactly one library (programs beside it are
             its *_main.cc files, or bench/programs' bench_*.cc), every library one folder, and
             no source file is compiled into two targets;
  sizes      no folder holds more than MAX_FILES source files, no file more than MAX_LINES lines.

Usage: layout_check.py SOURCE_DIR. First checks that the check refuses a tree made to break each
rule; then prints every breach of the real tree, one line each, then "PASS: layout" or
"FAIL: layout (N)"; exits 0 or 1.
"""
import os
import re
import subprocess
import sys

MAX_FILES = 25
MAX_LINES = 600

# Each library folder and the folders directly below it. The order is the build's: a folder
# stands on what is listed, and on what those stand on.
LAYERS = {
    "include/nano": [],
    "core": [],
    "launcher/source_filter": [],
    "launcher/listen_guard": ["launcher/source_filter"],
    "launcher/process": ["core"],
    "launcher/timeline": ["launcher/process"],
    "launcher/prepare": ["launcher/timeline", "launcher/source_filter"],
    "launcher/supervise": ["launcher/prepare"],
    "launcher/mpi": ["launcher/supervise"],
    "launcher/launch": ["launcher/mpi"],
    "launcher/tune": ["launcher/launch"],
    "cli": ["launcher/tune"],
    "runtime/timeline": ["core"],
    "runtime/rendezvous": ["runtime/timeline", "include/nano"],
    "runtime/collectives": ["runtime/rendezvous"],
    "runtime/communicators": ["runtime/collectives"],
    "runtime/folder_claim": ["core"],
    # The launch options name the launcher's types (launcher/prepare/launch_types.h).
    "runtime/options": ["launcher/prepare", "include/nano"],
    "runtime/training": ["runtime/communicators", "runtime/options", "runtime/folder_claim"],
    "runtime": ["runtime/training", "launcher/tune"],
    "python": ["runtime"],
    "bench/programs": ["runtime"],
}
# Header-only types that every folder may include: nano's error and a rank's environment.
ANYWHERE = {"nano/error.h", "nano/environment.h"}
# Folders whose programs may include anything (they test or use the whole tree).
FREE = ("tests/", "examples/")

SOURCE = re.compile(r"\.(c|cc|h)$")
COUNTED = re.compile(r"\.(c|cc|h|py|sh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)
LIBRARY = re.compile(r"^\s*(add_library|nano_folder_library|nano_runtime_library|pybind11_add_module)\(\s*(\S+)\s+(\S+)",
                     re.M)


def closure(folder):
    seen, todo = set(), [folder]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(LAYERS.get(f, []))
    return seen


def folder_of_include(path, tracked_dirs):
    if path.startswith("nano/"):
        return "include/nano"
    folder = os.path.dirname(path)
    return folder if folder and folder in tracked_dirs else None


def check(files, read):
    """Every breach of the rules in `files` (paths from the root), one line each; `read(path)`
    gives a file's text."""
    dirs = {os.path.dirname(f) for f in files}
    breaches = []

    # includes
    for f in files:
        folder = os.path.dirname(f)
        if not SOURCE.search(f) or folder not in LAYERS:
            continue
        allowed = closure(folder)
        for inc in INCLUDE.findall(read(f)):
            if inc in ANYWHERE:
                continue
            target = folder_of_include(inc, dirs)
            if target is None or target == folder:
                continue
            if target.startswith(FREE) or target not in allowed:
                breaches.append(f"includes: {f} includes {inc} ({target} is not below {folder})")

    # targets
    compiled = {}
    for folder in sorted(LAYERS):
        sources = [f for f in files if os.path.dirname(f) == folder and re.search(r"\.(c|cc)$", f)]
        cmake = os.path.join(folder, "CMakeLists.txt")
        if not sources:
            continue
        if cmake not in files:
            breaches.append(f"targets: {folder} has sources but no CMakeLists.txt")
            continue
        text = read(cmake)
        # (A function that defines libraries names its argument, ${target}: not one of them.)
        libraries = [m for m in LIBRARY.findall(text) if m[2] not in ("ALIAS", "INTERFACE") and "$" not in m[1]]
        if len(libraries) != 1:
            names = ", ".join(m[1] for m in libraries) or "none"
            breaches.append(f"targets: {folder} defines {len(libraries)} libraries ({names}), not one")
        words = re.findall(r"[\w${}/.-]+\.(?:c|cc)\b", re.sub(r"#.*", "", text))
        for w in words:
            if "/" in w or "$" in w:
                breaches.append(f"targets: {cmake} compiles {w}, a file outside its folder")
                continue
            path = f"{folder}/{w}"
            compiled.setdefault(path, 0)
            compiled[path] += 1
        for s in sources:
            n = compiled.get(s, 0)
            if n != 1:
                what = "no target" if n == 0 else f"{n} targets"
                breaches.append(f"targets: {s} is compiled into {what}")
        for path in compiled:
            if path.startswith(folder + "/") and os.path.dirname(path) == folder and path not in files:
                breaches.append(f"targets: {cmake} names {path}, which is not in the tree")

    # sizes
    per_folder = {}
    for f in files:
        if "/corpus/" in f or "/data/" in f:
            continue
        if COUNTED.search(f):
            per_folder.setdefault(os.path.dirname(f), []).append(f)
        if COUNTED.search(f) or f.endswith("CMakeLists.txt") or f.endswith(".cmake"):
            lines = read(f).count("\n")
            if lines > MAX_LINES:
                breaches.append(f"sizes: {f} has {lines} lines (at most {MAX_LINES})")
    for folder, members in sorted(per_folder.items()):
        if len(members) > MAX_FILES:
            breaches.append(f"sizes: {folder or '.'} holds {len(members)} source files (at most {MAX_FILES})")

    return breaches


def self_test():
    """The check itself fails on what it must refuse: a wrong-way include, a second library in a
    folder, a source compiled twice or outside its folder, a folder or file over its size."""
    tree = {
        "launcher/process/CMakeLists.txt": "nano_folder_library(nano_process process a.cc)\n",
        "launcher/process/a.cc": '#include "launcher/tune/t.h"\n#include "core/c.h"\n',
        "launcher/tune/CMakeLists.txt": "nano_folder_library(nano_tune tune t.cc)\nadd_library(x STATIC t.cc)\n",
        "launcher/tune/t.h": "",
        "launcher/tune/t.cc": '#include "launcher/process/a.h"\n' + "x\n" * (MAX_LINES + 1),
        "launcher/process/a.h": "",
        "core/c.h": "",
        "core/CMakeLists.txt": "nano_folder_library(nano_core core ../launcher/process/a.cc)\n",
        "core/c.cc": "",
    }
    tree.update({f"scripts/s{i}.sh": "" for i in range(MAX_FILES + 1)})
    found = check(sorted(tree), tree.get)
    expected = [
        "includes: launcher/process/a.cc includes launcher/tune/t.h",
        "targets: launcher/tune defines 2 libraries",
        "targets: launcher/tune/t.cc is compiled into 2 targets",
        "targets: core/CMakeLists.txt compiles ../launcher/process/a.cc",
        "targets: core/c.cc is compiled into no target",
        "sizes: launcher/tune/t.cc has",
        "sizes: scripts holds",
    ]
    missing = [e for e in expected if not any(b.startswith(e) for b in found)]
    # What is allowed stays allowed: tune/ may include process/, process/ may include core/.
    wrong = [b for b in found if "t.cc includes" in b or "includes core/c.h" in b]
    for m in missing:
        print(f"self-test: the check missed: {m}")
    for w in wrong:
        print(f"self-test: the check refused what is allowed: {w}")
    return not missing and not wrong


def main():
    if not self_test():
        print("FAIL: layout (its self-test)")
        return 1
    root = sys.argv[1]
    files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    files = [f for f in files if os.path.isfile(os.path.join(root, f))]

    def read(path):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
            return fh.read()

    breaches = check(files, read)
    for b in breaches:
        print(b)
    if breaches:
        print(f"FAIL: layout ({len(breaches)})")
        return 1
    print(f"PASS: layout ({len(files)} files, {len(LAYERS)} library folders)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The tree's layout rules (docs/developing.md, "The map"), checked from the files alone:

  map        every folder of C or C++ sources outside tests/ and examples/ is in LAYERS;
  includes   a library folder includes only its own headers and those of the folders below it
             (LAYERS: each folder's direct floor; what those may include, it may too; HEADERS:
             single headers a folder may include without standing on their folder). Relative
             includes are resolved against the including file's folder;
  targets    every library folder is exactly one library, every C/C++ file in it is compiled
             into exactly one target, from the folder's own CMakeLists.txt, and no CMakeLists
             elsewhere compiles it again; the folder's programs are built from its *_main.cc
             files only (bench/programs: bench_*.cc);
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
# stands on what is listed, and on what those stand on. include/nano holds the public headers'
# declarations (implemented across runtime/), and nothing below runtime/ calls up through them.
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
    "runtime/rendezvous": ["include/nano", "core"],
    "runtime/collectives": ["runtime/rendezvous", "runtime/timeline"],
    "runtime/communicators": ["runtime/collectives"],
    "runtime/folder_claim": ["core"],
    "runtime/checkpoint_files": ["runtime/timeline"],
    "runtime/options": ["include/nano", "runtime/checkpoint_files"],
    "runtime/training": ["runtime/communicators", "runtime/folder_claim", "runtime/checkpoint_files"],
    "runtime": ["runtime/training", "runtime/options", "launcher/tune"],
    # The extension links neither training/ nor runtime/ (they are not position independent).
    "python": ["runtime/collectives", "runtime/options", "runtime/folder_claim", "runtime/checkpoint_files",
               "launcher/tune"],
    "bench/programs": ["runtime"],
}
# Single headers a folder may include without standing on their folder: the launch options name
# the launcher's types (a header of types, nothing to link).
HEADERS = {"runtime/options": {"launcher/prepare/launch_types.h"}}
# Header-only types that every folder may include: nano's error and a rank's environment.
ANYWHERE = {"nano/error.h", "nano/environment.h"}
# Where a library folder's programs come from.
PROGRAMS = {"bench/programs": re.compile(r"^bench_\w+\.cc$")}
MAIN = re.compile(r"_main\.cc$")
# Folders whose files may include anything and are not libraries (they test or use the tree).
FREE = ("tests", "examples")
# The fuzzers' instrumented builds compile the parsers again with clang, by design.
RECOMPILES = {"tests/fuzz/CMakeLists.txt"}

SOURCE = re.compile(r"\.(c|cc|cpp|cxx|h|hh|hpp)$")
COMPILED = re.compile(r"\.(c|cc|cpp|cxx)$")
COUNTED = re.compile(r"\.(c|cc|cpp|cxx|h|hh|hpp|py|sh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)
LIBRARY = re.compile(r"^\s*(add_library|nano_folder_library|nano_runtime_library|pybind11_add_module)\(\s*(\S+)\s+([^\s)]+)",
                     re.M)
EXECUTABLE = re.compile(r"add_executable\(\s*(\S+)([^)]*)\)", re.S)
SOURCE_WORD = re.compile(r"[\w${}/.-]+\.(?:c|cc|cpp|cxx)\b")


def is_free(folder):
    return any(folder == f or folder.startswith(f + "/") for f in FREE)


def closure(folder):
    seen, todo = set(), [folder]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(LAYERS.get(f, []))
    return seen


def resolve_include(inc, including_folder, tracked_dirs):
    """The folder an include names, from the tree's root (None for a system or torch header)."""
    if inc.startswith("nano/"):
        return "include/nano", inc
    if inc.startswith("."):
        inc = os.path.normpath(os.path.join(including_folder, inc))
    folder = os.path.dirname(inc)
    return (folder, inc) if folder and folder in tracked_dirs else (None, inc)


def resolve_source(word, cmake_folder):
    """A source a CMakeLists names, as a path from the tree's root."""
    for root_var in ("${PROJECT_SOURCE_DIR}/", "${CMAKE_SOURCE_DIR}/"):
        if word.startswith(root_var):
            return word[len(root_var):]
    if word.startswith("${CMAKE_CURRENT_SOURCE_DIR}/"):
        word = word[len("${CMAKE_CURRENT_SOURCE_DIR}/"):]
    return os.path.normpath(os.path.join(cmake_folder, word))


def check(files, read):
    """Every breach of the rules in `files` (paths from the root), one line each; `read(path)`
    gives a file's text."""
    dirs = {os.path.dirname(f) for f in files}
    breaches = []

    # map
    for folder in sorted({os.path.dirname(f) for f in files if COMPILED.search(f)}):
        if folder not in LAYERS and not is_free(folder):
            breaches.append(f"map: {folder} holds sources but is not in the map (LAYERS)")

    # includes
    for f in files:
        folder = os.path.dirname(f)
        if not SOURCE.search(f) or folder not in LAYERS:
            continue
        allowed = closure(folder)
        for inc in INCLUDE.findall(read(f)):
            if inc in ANYWHERE:
                continue
            target, path = resolve_include(inc, folder, dirs)
            if target is None or target == folder or path in HEADERS.get(folder, ()):
                continue
            if is_free(target) or target not in allowed:
                breaches.append(f"includes: {f} includes {inc} ({target} is not below {folder})")

    # targets
    compiled = {}
    for cmake in sorted(f for f in files if os.path.basename(f) == "CMakeLists.txt"):
        cmake_folder = os.path.dirname(cmake)
        text = re.sub(r"#.*", "", read(cmake))
        own = cmake_folder in LAYERS
        for word in SOURCE_WORD.findall(text):
            path = resolve_source(word, cmake_folder)
            if own and os.path.dirname(path) != cmake_folder:
                breaches.append(f"targets: {cmake} compiles {word}, a file outside its folder")
            elif not own and os.path.dirname(path) in LAYERS and cmake not in RECOMPILES:
                breaches.append(f"targets: {cmake} compiles {path} again, outside its folder")
            if own:
                compiled[path] = compiled.get(path, 0) + 1
        if not own:
            continue
        for name, body in EXECUTABLE.findall(text):
            allowed = PROGRAMS.get(cmake_folder, MAIN)
            for word in SOURCE_WORD.findall(body):
                if not allowed.search(os.path.basename(word)):
                    breaches.append(f"targets: {cmake}: program {name} is built from {word}, not from a "
                                    f"{'bench_*' if cmake_folder in PROGRAMS else '*_main'}.cc file")
    for folder in sorted(LAYERS):
        sources = [f for f in files if os.path.dirname(f) == folder and COMPILED.search(f)]
        cmake = f"{folder}/CMakeLists.txt"
        if not sources:
            continue
        if cmake not in files:
            breaches.append(f"targets: {folder} has sources but no CMakeLists.txt")
            continue
        # (A function that defines libraries names its argument, ${target}: not one of them.)
        libraries = [m for m in LIBRARY.findall(read(cmake)) if m[2] not in ("ALIAS", "INTERFACE") and "$" not in m[1]]
        if len(libraries) != 1:
            names = ", ".join(m[1] for m in libraries) or "none"
            breaches.append(f"targets: {folder} defines {len(libraries)} libraries ({names}), not one")
        for s in sources:
            n = compiled.get(s, 0)
            if n != 1:
                what = "no target" if n == 0 else f"{n} targets"
                breaches.append(f"targets: {s} is compiled into {what}")
        for path in compiled:
            if os.path.dirname(path) == folder and path not in files:
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
    """The check itself fails on what it must refuse: a folder outside the map, a wrong-way
    include (plain, relative, or through a floor that is not linked), a second library in a
    folder, a source compiled twice, outside its folder or again elsewhere, a program not built
    from a *_main.cc file, a folder or file over its size."""
    tree = {
        "launcher/process/CMakeLists.txt": "nano_folder_library(nano_process process a.cc)\n"
                                           "add_library(i INTERFACE)\nadd_executable(tool tool.cc)\n"
                                           "add_executable(nano-x x_main.cc)\n",
        "launcher/process/a.cc": '#include "launcher/tune/t.h"\n#include "core/c.h"\n#include "../tune/t.h"\n',
        "launcher/process/tool.cc": "",
        "launcher/process/x_main.cc": "",
        "launcher/tune/CMakeLists.txt": "nano_folder_library(nano_tune tune t.cc)\nadd_library(x STATIC t.cc)\n",
        "launcher/tune/t.h": "",
        "launcher/tune/t.cc": '#include "launcher/process/a.h"\n' + "x\n" * (MAX_LINES + 1),
        "launcher/process/a.h": "",
        "launcher/extra/e.cc": "",
        "core/c.h": "",
        "core/CMakeLists.txt": "nano_folder_library(nano_core core ../launcher/process/a.cc)\n",
        "core/c.cc": "",
        "runtime/training/d.h": "",
        "runtime/options/CMakeLists.txt": "nano_runtime_library(nano_options options o.cc)\n",
        "runtime/options/o.cc": '#include "launcher/prepare/launch_types.h"\n#include "launcher/process/a.h"\n',
        "launcher/prepare/launch_types.h": "",
        "python/CMakeLists.txt": "pybind11_add_module(nano_torch_ext MODULE NO_EXTRAS m.cc)\n",
        "python/m.cc": '#include "runtime/training/d.h"\n',
        "tests/x/CMakeLists.txt": "add_executable(t ${PROJECT_SOURCE_DIR}/core/c.cc)\n",
    }
    tree.update({f"scripts/s{i}.sh": "" for i in range(MAX_FILES + 1)})
    found = check(sorted(tree), tree.get)
    expected = [
        "map: launcher/extra holds sources but is not in the map",
        "includes: launcher/process/a.cc includes launcher/tune/t.h",
        "includes: launcher/process/a.cc includes ../tune/t.h",
        "includes: runtime/options/o.cc includes launcher/process/a.h",
        "includes: python/m.cc includes runtime/training/d.h",
        "targets: launcher/tune defines 2 libraries",
        "targets: launcher/tune/t.cc is compiled into 2 targets",
        "targets: core/CMakeLists.txt compiles ../launcher/process/a.cc",
        "targets: core/c.cc is compiled into no target",
        "targets: tests/x/CMakeLists.txt compiles core/c.cc again",
        "targets: launcher/process/CMakeLists.txt: program tool is built from tool.cc",
        "sizes: launcher/tune/t.cc has",
        "sizes: scripts holds",
    ]
    missing = [e for e in expected if not any(b.startswith(e) for b in found)]
    # What is allowed stays allowed: tune/ may include process/, process/ core/, options/ the
    # launcher's types, a folder an INTERFACE library beside its own, a program its *_main.cc.
    wrong = [b for b in found if "t.cc includes" in b or "includes core/c.h" in b or "launch_types.h" in b
             or "launcher/process defines" in b or "x_main.cc" in b]
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

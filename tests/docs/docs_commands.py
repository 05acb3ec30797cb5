#!/usr/bin/python3
"""The README's and docs/' commands run as written.

- Every shell block marked runnable (a line `<!-- runnable -->` right before a ```sh fence) is
  run with `bash -euo pipefail` from a folder that looks like the repository root with this
  build as `build/` (the docs say `build/bin/nano-run`), each bounded by a timeout.
- In every fenced block, marked or not, each `nano-run` or `nano-init` command's options
  (up to the program it starts) are options that program has, per its --help.
- Every relative link of README.md and docs/*.md points to a file that exists.

Usage: docs_commands.py SOURCE_DIR BUILD_DIR   Prints "PASS: ..." or "FAIL: ..." (exit 1).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

SOURCE, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BLOCK_TIMEOUT = 180
failures = []


def pages():
    found = [os.path.join(SOURCE, "README.md")]
    docs = os.path.join(SOURCE, "docs")
    found += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return found


def blocks(path):
    """(first line number, fence info, marked runnable, text) of each fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*(```+|~~~+)\s*([\w-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2), i + 1
        marked = i > 0 and lines[i - 1].strip() == "<!-- runnable -->"
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        out.append((start + 1, info, marked, "\n".join(lines[start:j])))
        i = j + 1
    return out


def help_options(program):
    """{option: takes a value} from `program --help`."""
    text = subprocess.run([os.path.join(BUILD, "bin", program), "--help"], capture_output=True, text=True,
                          timeout=30).stdout
    options = {}
    for line in text.split("\n"):
        m = re.match(r"^\s+((?:-\w,)?--[\w-]+(?:,--[\w-]+)*)(?: (\S+))?", line)  # one space: a value
        if not m:
            continue
        value = m.group(2) or ""
        takes = value[:1].isupper() or value.startswith("[")  # "INT", "INT|auto", "[VALUE]"
        for name in m.group(1).split(","):
            options[name] = takes
    return options


def check_options(path, line, command, program, options):
    """`command` (one shell command, joined) starts `program`: its options are known."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return
    while words and words[0] != program and not words[0].endswith("/" + program):
        words.pop(0)
    words = words[1:]
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--" or not w.startswith("-") or w == "-":
            break  # the program nano-run starts, and its own arguments
        name = w.split("=", 1)[0]
        if name not in options:
            failures.append(f"{os.path.relpath(path, SOURCE)}:{line}: {program} has no option {name}: {command}")
            return
        i += 2 if options[name] and "=" not in w else 1


def commands_of(text):
    """The block's commands, continuation lines joined, prompts ($ ) removed."""
    joined, out = "", []
    for raw in text.split("\n"):
        line = re.sub(r"^\s*\$ ", "", raw)
        joined += line.rstrip("\\") + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            out.append(joined)
            joined = ""
    return out


def root_with_build():
    """A folder where ./build is this build and everything else is the source tree's."""
    if os.path.realpath(os.path.join(SOURCE, "build")) == os.path.realpath(BUILD):
        return SOURCE, None
    tmp = tempfile.mkdtemp(prefix="nano-docs-root-")
    for name in os.listdir(SOURCE):
        if name != "build":
            os.symlink(os.path.join(SOURCE, name), os.path.join(tmp, name))
    os.symlink(BUILD, os.path.join(tmp, "build"))
    return tmp, tmp


def main():
    options = {p: help_options(p) for p in ("nano-run", "nano-init")}
    runnable = []
    for path in pages():
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(path), target)):
                failures.append(f"{os.path.relpath(path, SOURCE)}: broken link {target}")
        for line, info, marked, body in blocks(path):
            if marked:
                if info != "sh":
                    failures.append(f"{os.path.relpath(path, SOURCE)}:{line}: a runnable block must be ```sh")
                runnable.append((path, line, body))
            if info not in ("", "sh", "bash", "console", "shell"):
                continue
            for command in commands_of(body):
                for program in options:
                    if re.search(r"(^|[\s/])" + program + r"(\s|$)", command):
                        check_options(path, line, command, program, options[program])
    if not any(os.path.basename(p) == "README.md" for p, _, _ in runnable):
        failures.append("README.md has no block marked runnable")
    root, made = root_with_build()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        for path, line, body in runnable:
            where = f"{os.path.relpath(path, SOURCE)}:{line}"
            try:
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=root, env=env, capture_output=True,
                                   text=True, timeout=BLOCK_TIMEOUT, start_new_session=True)
            except subprocess.TimeoutExpired:
                failures.append(f"{where}: still running after {BLOCK_TIMEOUT} s")
                continue
            print(f"--- {where} (exit {r.returncode})\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
            if r.returncode != 0:
                failures.append(f"{where}: exited {r.returncode}: {r.stderr.strip()[-400:]}")
    finally:
        if made:
            for name in os.listdir(made):
                os.unlink(os.path.join(made, name))
            os.rmdir(made)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1)
    print(f"PASS: {len(runnable)} runnable blocks ran; every nano-run and nano-init option in "
          f"{len(pages())} pages exists; every link resolves")


main()

#!/usr/bin/python3
"""The documents' contract: the front page stays a front page, links lead somewhere, figures say where
they were measured.

Checks every tracked Markdown file of the repository (git ls-files --cached --others --exclude-standard "*.md"; outside a git checkout,
every *.md below the root):
  1. README.md has at most --max-readme-lines lines (the front page's budget).
  2. Every Markdown link or image ([text](target), ![alt](target)) to a local target names a file or
     folder that exists, relative to the document; a #fragment into a Markdown file names one of its
     headings (GitHub's anchors).
  3. Every `code span` that spells a path inside the repository's fixed top level (src/, include/,
     mpi/, io/, jobs/, slurm/, tests/, tools/, CMakeLists.txt) exists, relative to the root or to the
     document: a renamed file cannot leave its old name behind in the prose. Spans with placeholders
     (<...>, *, {...}, $VAR, '...') and generated trees (build/, runs/, data/) are not paths to check.
  4. Every results table (a Markdown table whose header names a measured quantity: images/s, GFLOP/s,
     time-to-solution, ms/step, ...) names a CPU and a date (YYYY-MM-DD; YYYY-MM for a published
     figure), in its own cells or in the text of its section above it (from the nearest heading down
     to the table). Where the CPU cannot be established, the words "CPU not recorded" say so and
     count as naming it. A file inside a results/ folder (a generated scaling.md, say) may instead
     have its record in a README.md of that results folder: a line there that names the file (or
     the run folder holding it) and a CPU and a date.
  5. Every option nostrum-train declares (src/train/train_options.cpp: a line opening with
     ("name", ...)) is explained in src/train/README.md, the one reference of its options.
Prints one line per problem, naming the file and line, and exits 1 if there is any.

usage: check_docs.py [--root DIR] [--max-readme-lines N]
"""
import argparse
import os
import re
import subprocess
import sys

TOP_LEVEL = ("src/", "include/", "mpi/", "io/", "jobs/", "slurm/", "tests/", "tools/")
TOP_FILES = ("CMakeLists.txt", "README.md")
# A header cell naming one of these makes a table a results table.
MEASURED = re.compile(
    r"images/s|img/s|gflop/s|gb/s|mb/s|steps/s|ms/step|ms per|time-to-solution|"
    r"\bms\b|\bus\b|seconds|speed|\bratio\b|measured|efficiency|error",
    re.IGNORECASE)
# What names a CPU: a vendor or product name, a core family, or lscpu's family/model pair.
CPU = re.compile(
    r"\bAMD\b|\bIntel\b|EPYC|Xeon|Zen ?\d|Neoverse|Graviton|Ampere|Cortex|aarch64|arm64|"
    r"family \d+,? model \d+|GenuineIntel|AuthenticAMD|CPU not recorded",
    re.IGNORECASE)
DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d(?:-[0-3]\d)?\b")  # YYYY-MM-DD, or YYYY-MM for a publication
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
PLACEHOLDER = re.compile(r"[<>*{}$|\\]|\.\.\.|\s")


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md"],
                             check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
        # Files deleted in the working tree but still in the index are not documents any more.
        return sorted({f for f in files if os.path.isfile(os.path.join(root, f))})
    except (OSError, subprocess.CalledProcessError):
        found = []
        for base, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
            found += [os.path.relpath(os.path.join(base, n), root) for n in names if n.endswith(".md")]
        return sorted(found)


def strip_fences(lines):
    """The lines with fenced code blocks blanked (their contents are not prose, links or tables)."""
    out, fenced = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def github_anchor(heading):
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}  # path -> the anchors of its headings, read once


def anchors_of(path):
    cache = _anchors
    if path not in cache:
        seen, anchors = {}, set()
        with open(path, encoding="utf-8") as f:
            for line in strip_fences(f.read().splitlines()):
                m = HEADING.match(line)
                if m:
                    a = github_anchor(m.group(2))
                    n = seen.get(a, 0)
                    seen[a] = n + 1
                    anchors.add(a if n == 0 else f"{a}-{n}")
        cache[path] = anchors
    return cache[path]


def check_link(root, doc, lineno, target, problems):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
        return
    path, _, fragment = target.partition("#")
    here = os.path.dirname(os.path.join(root, doc))
    full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, doc)
    if not os.path.exists(full):
        problems.append(f"{doc}:{lineno}: link to {target}: no such file")
    elif fragment and full.endswith(".md") and fragment.lower() not in anchors_of(full):
        problems.append(f"{doc}:{lineno}: link to {target}: no heading with anchor #{fragment}")


def check_code_path(root, doc, lineno, span, problems):
    span = span.strip().rstrip(".,;:")
    if not (span.startswith(TOP_LEVEL) or span in TOP_FILES) or PLACEHOLDER.search(span):
        return
    span = span.split("::")[0]
    for base in (root, os.path.dirname(os.path.join(root, doc))):
        if os.path.exists(os.path.join(base, span)):
            return
    problems.append(f"{doc}:{lineno}: `{span}` names no file or folder of the repository")


def tables(lines):
    """(first line index, header, rows) of each Markdown table; rows as raw lines."""
    i = 0
    while i < len(lines) - 1:
        if (lines[i].lstrip().startswith("|")
                and re.match(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$", lines[i + 1])):
            start = i
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                i += 1
            yield start, lines[start], lines[start + 2:i]
        else:
            i += 1


def record_line(root, doc):
    """The line of a results folder's README.md that records doc (names it or its run folder and a
    CPU and a date), or None. doc must lie below a folder named results."""
    parts = doc.split("/")
    if "results" not in parts[:-1]:
        return None
    top = len(parts) - 1 - parts[:-1][::-1].index("results")  # index just past the last results/
    for depth in range(len(parts) - 1, top - 1, -1):
        readme = os.path.join(root, *parts[:depth], "README.md")
        if depth == len(parts) - 1 and parts[-1] == "README.md" or not os.path.isfile(readme):
            continue
        below = parts[depth]  # the file itself or the run folder that holds it
        with open(readme, encoding="utf-8") as f:
            for line in f:
                if below in line and CPU.search(line) and DATE.search(line):
                    return line
    return None


def check_results_tables(root, doc, lines, problems):
    recorded = record_line(root, doc) is not None
    for start, header, rows in tables(lines):
        if not MEASURED.search(header):
            continue
        section_top = start
        while section_top > 0 and not HEADING.match(lines[section_top - 1]):
            section_top -= 1
        heading = lines[section_top - 1] if section_top > 0 else ""
        context = "\n".join([heading] + lines[section_top:start] + [header] + rows)
        missing = [what for what, pattern in (("CPU", CPU), ("date", DATE))
                   if not pattern.search(context)]
        if missing and not recorded:
            problems.append(f"{doc}:{start + 1}: results table without its {' and '.join(missing)} "
                            "(name them in the table or in its section's text above it; "
                            "in a results/ folder, its README.md may record them)")


OPTION_DECL = re.compile(r'^\s*\("([a-z][a-z0-9-]*)(?:,[a-z])?"\s*,', re.MULTILINE)


def check_train_options(root, problems):
    source = os.path.join(root, "src", "train", "train_options.cpp")
    reference = os.path.join(root, "src", "train", "README.md")
    if not os.path.isfile(source):
        return
    with open(source, encoding="utf-8") as f:
        declared = OPTION_DECL.findall(f.read())
    if not declared:
        problems.append("src/train/train_options.cpp: no option declarations found (has their form changed?)")
    text = open(reference, encoding="utf-8").read() if os.path.isfile(reference) else ""
    for name in declared:
        if name != "help" and not re.search(r"--" + re.escape(name) + r"(?![a-z0-9-])", text):
            problems.append(f"src/train/README.md: option --{name} (src/train/train_options.cpp) "
                            "is not explained there")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--max-readme-lines", type=int, default=150)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    problems = []

    readme = os.path.join(root, "README.md")
    with open(readme, encoding="utf-8") as f:
        n = len(f.read().splitlines())
    if n > args.max_readme_lines:
        problems.append(f"README.md: {n} lines, over the front page's budget of "
                        f"{args.max_readme_lines}: move the detail to the folder README it belongs to")

    docs = markdown_files(root)
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            lines = strip_fences(f.read().splitlines())
        for lineno, line in enumerate(lines, 1):
            for m in LINK.finditer(line):
                check_link(root, doc, lineno, m.group(1), problems)
            for m in CODE_SPAN.finditer(LINK.sub("", line)):
                check_code_path(root, doc, lineno, m.group(1), problems)
        check_results_tables(root, doc, lines, problems)

    check_train_options(root, problems)

    for p in problems:
        print(p)
    print(f"check_docs: {len(docs)} Markdown files, README.md {n} lines (budget "
          f"{args.max_readme_lines}), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""What every part of scaling-study shares: where the repository (or the installed tree) is, error
exits, reading JSON, INI job files, and the tool's data files (network profiles, the RCP table)."""
import configparser
import json
import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# tools/scaling/scaling_study in the repository; share/nostrum/scaling/scaling_study installed
DATA_DIR = os.path.dirname(PACKAGE_DIR)
if os.path.basename(os.path.dirname(DATA_DIR)) == "tools":
    ROOT = os.path.dirname(os.path.dirname(DATA_DIR))          # the repository
else:
    ROOT = os.path.dirname(os.path.dirname(os.path.dirname(DATA_DIR)))  # the install prefix


class ScalingError(Exception):
    """Bad input or a refused question: the message names the file, option or point."""


def die(message):
    print("scaling-study: " + message, file=sys.stderr)
    sys.exit(2)


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)


def job_value(job, key):
    """A key of a nostrum-train INI job file (e.g. batch-size), or None."""
    parser = configparser.ConfigParser()
    with open(job, encoding="utf-8") as f:
        parser.read_string("[job]\n" + f.read())
    return parser["job"].get(key)


def shown(path):
    """A path as printed: relative to the working directory when it lies inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def data_file(kind, name, suffix):
    """A file of the tool's own data (kind: profiles or rcp) by path, or by name without suffix."""
    if os.path.isfile(name):
        return name
    path = os.path.join(DATA_DIR, kind, name + suffix)
    if os.path.isfile(path):
        return path
    raise ScalingError(f"{kind[:-1] if kind.endswith('s') else kind} '{name}' not found (a file, or a "
                       f"name in {os.path.join(DATA_DIR, kind)})")


def find_binary(name, subdir):
    for path in (os.path.join(ROOT, "build", subdir, name), os.path.join(ROOT, "bin", name)):
        if os.path.exists(path):
            return path
    return None

#!/usr/bin/env python3
"""Every function nccl.h declares is exported by the shim.

  check_symbols.py NCCL_H LIBNCCL_SO

Reads the declarations (return type, name, opening parenthesis at the start of
a line, as nccl.h writes them), lists the library's defined dynamic symbols
with nm -D, and fails naming each declared function the library lacks.
"""
import re
import subprocess
import sys


def declared(header):
    text = open(header).read()
    names = re.findall(r"^\s*(?:ncclResult_t|const\s+char\s*\*|void)\s+(p?nccl\w+)\s*\(", text, re.M)
    return sorted(set(names))


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def main():
    header, lib = sys.argv[1], sys.argv[2]
    want = declared(header)
    have = exported(lib)
    missing = [n for n in want if n not in have]
    if len(want) < 40:
        print(f"only {len(want)} declarations found in {header}: the pattern no longer fits the header")
        return 1
    print(f"{len(want) - len(missing)} of the {len(want)} functions {header} declares are exported by {lib}")
    for n in missing:
        print(f"missing: {n}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

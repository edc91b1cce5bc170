#!/usr/bin/env python3
# Compiles a text file into a C string constant: embed.py IN OUT NAME.
# Used for the Varlink interface definitions, so the text clients get from
# GetInterfaceDescription is exactly the file kept in the repository.
import sys

src, out, name = sys.argv[1:4]
text = open(src, encoding="utf-8").read()
lines = ["/* Generated from %s by embed.py; do not edit. */" % src.split("/")[-1],
         "const char %s[] =" % name]
for line in text.splitlines(keepends=True):
    esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lines.append('    "%s"' % esc)
lines[-1] += ";"
if not text:
    lines.append('    "";')
open(out, "w", encoding="utf-8").write("\n".join(lines) + "\n")

"""Writes a C++ source defining gputravel::SystemdUnits() from unit files.

Usage: embed_units.py OUT.cc PREFIX FILE...  (PREFIX: the directory the
paths are made relative to, e.g. deploy/systemd).
"""
import sys

out, prefix, files = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3:]
with open(out, "w") as f:
    f.write('#include "cli/systemd_units.h"\n\nnamespace gputravel {\n\n')
    f.write("const std::vector<SystemdUnitFile>& SystemdUnits() {\n")
    f.write("  static const std::vector<SystemdUnitFile>* units =\n")
    f.write("      new std::vector<SystemdUnitFile>{\n")
    for path in files:
        rel = path[path.index(prefix) + len(prefix):]
        text = open(path).read()
        if ")gtunit\"" in text:
            sys.exit("embed_units: %s contains the raw string's delimiter" % path)
        f.write('          {"%s", R"gtunit(%s)gtunit"},\n' % (rel, text))
    f.write("      };\n  return *units;\n}\n\n}  // namespace gputravel\n")

#!/usr/bin/env python3
"""Summarise the node e2e suite's junit report: the specs of the run (those
ginkgo's focus and skip selected) by state, then every spec that did not pass
with its state and reason (the message of its failure or of its Skip).

Usage: summary.py JUNIT.xml [SECONDS RC]
"""
import collections
import sys
import xml.etree.ElementTree as ET


def main():
    tree = ET.parse(sys.argv[1])
    counts = collections.Counter()
    lines = []
    for tc in tree.iter("testcase"):
        name = tc.get("name", "")
        if not name.startswith("[It] "):
            continue  # BeforeSuite, AfterSuite, report nodes
        name = name[len("[It] "):]
        status = tc.get("status")
        skipped = tc.find("skipped")
        if status == "skipped" and skipped is not None and skipped.get("message") == "skipped":
            counts["not selected"] += 1  # left out by the focus or skip
            continue
        counts[status] += 1
        if status == "passed":
            lines.append("passed %s" % name)
            continue
        reason = ""
        for tag in ("failure", "error", "skipped"):
            el = tc.find(tag)
            if el is not None:
                reason = (el.get("message") or el.text or "").strip()
                break
        reason = " ".join(reason.split())[:400]
        lines.append("%s %s\n    %s" % (status, name, reason))
    ran = sum(v for k, v in counts.items() if k != "not selected")
    order = ["passed", "failed", "skipped", "pending", "panicked", "timedout", "interrupted"]
    parts = ["%d %s" % (counts[k], k) for k in order if counts[k]]
    print("%d specs selected: %s" % (ran, ", ".join(parts)))
    if len(sys.argv) >= 4:
        print("e2e run %ss, exit status %s" % (sys.argv[2], sys.argv[3]))
    for line in sorted(l for l in lines if not l.startswith("passed ")):
        print(line)
    for line in sorted(l for l in lines if l.startswith("passed ")):
        print(line)


if __name__ == "__main__":
    main()

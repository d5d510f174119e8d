"""Runs every ```python block of a document, in order, in the current directory.

    run_doc_python.py DOC [OLD=NEW]...

Each OLD=NEW replaces a path the document names (a checkpoint of step 1000, say) with one the
test has. Exit status 1 with the block's number and the exception when a block fails; the
blocks' own output goes to stdout.
"""
import re
import sys
import traceback


def main():
    doc, replacements = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    blocks = re.findall(r"```python\n(.*?)```", open(doc).read(), re.S)
    if not blocks:
        sys.exit(f"{doc}: no ```python block")
    for number, block in enumerate(blocks, 1):
        for old, new in replacements:
            block = block.replace(old, new)
        try:
            exec(compile(block, f"{doc} python block {number}", "exec"), {})
        except Exception:
            traceback.print_exc(limit=1)
            sys.exit(f"{doc}: python block {number} failed")
    print(f"{doc}: {len(blocks)} python block(s) ran")


if __name__ == "__main__":
    main()

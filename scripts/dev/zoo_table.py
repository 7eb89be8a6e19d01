"""Prints the README's "Existing models and datasets" tables, generated from rl755/zoo/rows.py.

    python scripts/dev/zoo_table.py            # print them
    python scripts/dev/zoo_table.py --write    # replace them in README.md (between the markers)

tests/test_zoo.py fails when README.md holds anything else.
"""

import os

from absl import app, flags

from rl755 import zoo
from rl755.zoo import readme

flags.DEFINE_bool("write", False, "Replace the tables in README.md instead of printing them.")
FLAGS = flags.FLAGS

README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "README.md")


def main(argv):
    del argv
    tables = zoo.readme_tables()
    if not FLAGS.write:
        print(tables)
        return
    with open(README) as f:
        text = f.read()
    start, end = text.index(readme.BEGIN), text.index(readme.END) + len(readme.END)
    with open(README, "w") as f:
        f.write(text[:start] + tables + text[end:])
    print(f"Updated {README}.")


if __name__ == "__main__":
    app.run(main)

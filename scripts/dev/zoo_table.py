"""Prints the zoo tables of docs/guides/zoo.md, generated from rl755/zoo/rows.py.

    python scripts/dev/zoo_table.py            # print them
    python scripts/dev/zoo_table.py --write    # replace them in docs/guides/zoo.md (between
                                               # the markers) and rewrite the saved_models modules

tests/test_zoo.py fails when the page or a rl755/models/<env>/saved_models.py holds anything
else (rl755.zoo.saved_source generates the modules).
"""

import os

from absl import app, flags

from rl755 import zoo
from rl755.zoo import readme, saved_source

flags.DEFINE_bool(
    "write", False, "Replace the tables in docs/guides/zoo.md instead of printing them."
)
FLAGS = flags.FLAGS

PAGE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), *readme.PAGE.split("/")
)


def main(argv):
    del argv
    tables = zoo.readme_tables()
    if not FLAGS.write:
        print(tables)
        return
    with open(PAGE) as f:
        text = f.read()
    start, end = text.index(readme.BEGIN), text.index(readme.END) + len(readme.END)
    with open(PAGE, "w") as f:
        f.write(text[:start] + tables + text[end:])
    print(f"Updated {PAGE}.")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for environment in saved_source.ENVIRONMENTS:
        path = os.path.join(root, saved_source.module_path(environment))
        with open(path, "w") as f:
            f.write(saved_source.source(environment))
        print(f"Updated {path}.")


if __name__ == "__main__":
    app.run(main)

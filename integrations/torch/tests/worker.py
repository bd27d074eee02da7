"""One rank of a harness.run: initializes the default process group from the
environment, runs scenarios.<name>(args) and writes {"result": ...} or
{"error": traceback} to the output file."""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    name, args, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    import scenarios
    try:
        result = {"result": getattr(scenarios, name)(args)}
        code = 0
    except BaseException:
        traceback.print_exc()
        result = {"error": traceback.format_exc()}
        code = 1
    with open(out, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: a rank whose peer died must not linger


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Simulate a learner's first run on a fresh Colab runtime (a development tool, not part of `make test`):
# a clean venv with only the pinned torch, the repository NOT on the path, `google.colab` present, and the
# bootstrap cell run as chapter 01 has it: it clones the repository and installs specdec_lib with its
# dependencies, keeping that torch. The clone goes to
# this repository's committed HEAD instead of GitHub (git's url.insteadOf), since this machine has no
# internet. Then the same with an old transformers: importing specdec_lib must refuse it, naming the fix;
# and a first run on a runtime that has that old transformers, which the bootstrap upgrades.
#
#     bash tests/colab_sim.sh            # about a minute and a half; prints the three runs
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SIM="${SIM:-/tmp/colab_sim}"
URL="$(cd "$ROOT" && python3 -c 'import sys; sys.path.insert(0, "specdec_lib"); import _export; print(_export.REPO_URL)')"
TORCH="$(grep -E '^torch==' "$ROOT/requirements.txt")"
rm -rf "$SIM" /content/specdec
python3 -m venv "$SIM/venv"
"$SIM/venv/bin/pip" install -q "$TORCH" setuptools
echo "== a fresh runtime: $("$SIM/venv/bin/pip" list 2>/dev/null | grep -c .) lines of pip list, transformers $("$SIM/venv/bin/python" -c 'import transformers' 2>/dev/null && echo present || echo absent)"
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.file://$ROOT.insteadOf" GIT_CONFIG_VALUE_0="$URL"
mkdir -p "$SIM/cwd" && cd "$SIM/cwd"  # not inside the repository, as on Colab
cat > "$SIM/first_cells.py" <<'EOF'
import json, sys, types

sys.modules["google.colab"] = types.ModuleType("google.colab")  # what the bootstrap looks for
nb = json.load(open(sys.argv[1]))
bootstrap = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
exec(bootstrap)
import specdec_lib as sd
from specdec_lib.zoo import heldout_prompts, load_pair

target, draft, tok = load_pair("tiny-code")
ids = tok(heldout_prompts(1)[0], return_tensors="pt")["input_ids"][0]
out = sd.generate(target, ids, 16, sd.make_proposer("chain:3", target, draft))
import torch, transformers
print("bootstrap ok: specdec_lib from", sd.__file__, "| torch", torch.__version__, "| transformers",
      transformers.__version__, "| 16 tokens with chain:3, tau", round(out.stats.tau, 2))
EOF
echo "== the bootstrap cell (clones the repository, installs specdec_lib and its dependencies)"
"$SIM/venv/bin/python" "$SIM/first_cells.py" "$ROOT/notebooks/01_autoregressive.ipynb"
echo "== the same runtime with an old transformers"
"$SIM/venv/bin/pip" install -q "transformers==4.40.2"
"$SIM/venv/bin/python" -c "import torch; print('torch still', torch.__version__)"
if "$SIM/venv/bin/python" -c "import sys; sys.path.insert(0, '/content/specdec'); import specdec_lib" 2> "$SIM/err.txt"; then
    echo "FAIL: an unsupported transformers was accepted"; exit 1
fi
tail -n 1 "$SIM/err.txt"
echo "== a runtime that starts with that old transformers: the bootstrap's install upgrades it"
rm -f /content/specdec/.colab-installed
"$SIM/venv/bin/python" "$SIM/first_cells.py" "$ROOT/notebooks/01_autoregressive.ipynb"

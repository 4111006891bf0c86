#!/usr/bin/env bash
# Serve a GGUF model on 127.0.0.1 through llama-cpp-python's OpenAI-compatible server, for `--agent openai`.
#
#   scripts/local-model.sh PATH.gguf [PORT]
#
# Environment: PYTHON (default .venv/bin/python: the interpreter with llama-cpp-python[server]), N_CTX
# (context tokens, default 8192), N_THREADS (default: all cores), WHEELHOUSE (default
# ~/.cache/automedbench/wheels: where a built llama-cpp-python wheel is kept for reuse). Runs in the
# foreground; stop it with Ctrl-C. llama-cpp-python has only a source release on PyPI: building it compiles
# llama.cpp, measured at 11 minutes on an idle 2-core machine and 41 minutes under load. Build the wheel
# once into WHEELHOUSE and every later venv (or machine sharing the folder) installs it in seconds:
#   pip wheel 'llama-cpp-python[server]' -w "$WHEELHOUSE"
#   pip install --find-links "$WHEELHOUSE" 'llama-cpp-python[server]'
# N_CTX must hold the brief: the run refuses (exit 2, with the sizes) a context_window that cannot.
# CHAT_FORMAT (default: the model's own template) names llama-cpp-python's chat format; an installed agent that
# needs structured tool calls from a model without a server-side tool parser (Qwen Code, OpenHands) takes
# CHAT_FORMAT=chatml-function-calling. Installed agents' prompts are long (Qwen Code's first request is ~20 000
# tokens): give them N_CTX=32768.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-}
PORT=${2:-8765}
PY=${PYTHON:-.venv/bin/python}
N_CTX=${N_CTX:-8192}
N_THREADS=${N_THREADS:-$(nproc)}
if [ -z "$MODEL" ] || [ ! -f "$MODEL" ]; then
  echo "local-model: usage: scripts/local-model.sh PATH.gguf [PORT] (no model file ${MODEL:-given})" >&2
  exit 2
fi
WHEELHOUSE=${WHEELHOUSE:-$HOME/.cache/automedbench/wheels}
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
  if ls "$WHEELHOUSE"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "local-model: $PY has no llama-cpp-python server; a built wheel is in $WHEELHOUSE (seconds):" \
         "$PY -m pip install --find-links '$WHEELHOUSE' 'llama-cpp-python[server]'" >&2
  else
    echo "local-model: $PY has no llama-cpp-python server. Build it once and keep the wheel (compiles llama.cpp:" \
         "11 min on an idle 2-core machine, 41 min under load): $PY -m pip wheel 'llama-cpp-python[server]'" \
         "-w '$WHEELHOUSE' && $PY -m pip install --find-links '$WHEELHOUSE' 'llama-cpp-python[server]'" >&2
  fi
  exit 2
fi
echo "local-model: serving $MODEL on http://127.0.0.1:$PORT/v1 (n_ctx $N_CTX). Run an agent with:"
echo "  automedbench run --task segmentation/demo --agent openai --agent-option model=local" \
     "--agent-option base_url=http://127.0.0.1:$PORT/v1 --agent-option api_key_env=none" \
     "--agent-option context_window=$N_CTX --agent-option max_tokens=1024 --agent-option text_tool_calls=true"
exec "$PY" -m llama_cpp.server --model "$MODEL" --model_alias local --host 127.0.0.1 --port "$PORT" \
  --n_ctx "$N_CTX" --n_threads "$N_THREADS" ${CHAT_FORMAT:+--chat_format "$CHAT_FORMAT"}

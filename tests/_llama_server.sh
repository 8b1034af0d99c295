#!/bin/sh
# llama-server's place for llama.cpp's server test suite (its LLAMA_SERVER_BIN_PATH hook):
# runs `dotllm serve` with the arguments the suite gives llama-server. Only the model is
# translated here: the suite names Hugging Face repositories (--hf-repo/--hf-file), which are
# mapped to the test data's local files; every other flag goes to `dotllm serve` unchanged
# (it takes llama-server's flags itself). A model not available here exits 1 with one line.
#
# The suite's BERT embedding model (bge-small-en-v1.5) is not available offline: its place is
# taken by all-MiniLM-L6-v2 (DOTLLM_SHIM_MINILM, converted by tests/_minilm.ts), the same BERT
# architecture and width (6 layers against 12, 384 dimensions); the suite's embedding tests
# check shapes, norms and errors, not values.
#
# Environment: DOTLLM_SHIM_DENO (the deno binary), DOTLLM_SHIM_ROOT (the checkout),
# DOTLLM_TESTDATA (the test data), DOTLLM_SHIM_MINILM (a GGUF of all-MiniLM-L6-v2, optional).
set -eu
repo="" file="" model=""
n=$#
i=0
while [ "$i" -lt "$n" ]; do
  a=$1
  shift
  i=$((i + 1))
  case "$a" in
  -hf | -hfr | --hf-repo) repo=$1; shift; i=$((i + 1)) ;;
  -hff | --hf-file) file=$1; shift; i=$((i + 1)) ;;
  *) set -- "$@" "$a" ;;
  esac
done
case "$repo|$file" in
"|") ;;
"ggml-org/test-model-stories260K|" | "ggml-org/models|tinyllamas/stories260K.gguf")
  model="$DOTLLM_TESTDATA/models/stories260K.gguf" ;;
"ggml-org/models|bert-bge-small/ggml-model-f16.gguf")
  if [ -z "${DOTLLM_SHIM_MINILM:-}" ]; then
    echo "llama-server shim: no embedding model (DOTLLM_SHIM_MINILM) for $repo $file" >&2
    exit 1
  fi
  model="$DOTLLM_SHIM_MINILM" ;;
*)
  echo "llama-server shim: model $repo${file:+ $file} is not available offline here" >&2
  exit 1 ;;
esac
if [ -n "$model" ]; then set -- --model "$model" "$@"; fi
exec "$DOTLLM_SHIM_DENO" run --quiet --no-prompt -A "$DOTLLM_SHIM_ROOT/cli.ts" serve "$@"

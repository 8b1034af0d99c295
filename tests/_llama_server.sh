#!/bin/sh
# llama-server's place for llama.cpp's server test suite (its LLAMA_SERVER_BIN_PATH hook):
# runs `dotllm serve` with the arguments the suite gives llama-server. Only the model is
# translated here: the suite names Hugging Face repositories (--hf-repo/--hf-file), which are
# mapped to the test data's local files; every other flag goes to `dotllm serve` unchanged
# (it takes llama-server's flags itself). A model not available here exits 1 with one line.
#
# Environment: DOTLLM_SHIM_DENO (the deno binary), DOTLLM_SHIM_ROOT (the checkout),
# DOTLLM_TESTDATA (the test data).
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
*)
  echo "llama-server shim: model $repo${file:+ $file} is not available offline here" >&2
  exit 1 ;;
esac
if [ -n "$model" ]; then set -- --model "$model" "$@"; fi
exec "$DOTLLM_SHIM_DENO" run --quiet --no-prompt -A "$DOTLLM_SHIM_ROOT/cli.ts" serve "$@"

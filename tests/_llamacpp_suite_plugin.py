# A pytest plugin (-p) for llama.cpp's server test suite run against dotllm: the suite's
# conftest first starts every preset server once to download its model from Hugging Face
# (ServerPreset.load_all). Here models are local files (tests/_llama_server.sh maps them), so
# there is nothing to download: the preload is skipped. Nothing else of the suite changes.
import utils

utils.ServerPreset.load_all = staticmethod(lambda: None)

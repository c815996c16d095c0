"""The project's evaluators on the other challenge platforms: thin adapters generated from the registry.

`submissions`: what a participant uploads there (the run files, one file or a zip) and how a zip is unpacked safely;
`aicrowd`: the AIcrowd evaluator folder (`medchallenge aicrowd-evaluator`) and the class it imports; `codabench`:
the Codabench competition bundles (`make codabench`). Each runs the one evaluator command, unchanged.
"""

"""The zoo's stages that live outside ``zoo_train``: one small module per kind of work (hand-written plumbing,
not a chapter). ``chat_data``: the real model's own answers, written in resumable chunks, and the target
features its drafters train on."""

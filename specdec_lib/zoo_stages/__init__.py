"""The zoo's stages that live outside ``zoo_train``: one small module per kind of work (hand-written plumbing,
not a chapter). ``chat_data``: the real model's own answers, written in resumable chunks, and the target
features its drafters train on. ``eagle3_real``: the real model's EAGLE-3, in resumable runs. ``ladder``: the
fair ladder (issue 51), each drafter retrained on the target's regenerated text for a stated budget."""

"""Watch a policy play: episodes played in a process of their own, rendered, annotated and saved.

``episode.play_episode`` runs in that process (``process.EpisodeProcess``), never on an actor or the
trainer; ``frames`` turns rendered frames into captioned PNGs for the panel's player and a GIF for
the run's ``videos/`` folder and TensorBoard.
"""

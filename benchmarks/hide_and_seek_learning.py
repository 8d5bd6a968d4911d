"""Does hide-and-seek learn in pure self-play? The showcase config trained, then evaluated.

Trains ``showcase_config`` (lite quadrant, 1 hider vs 1 seeker, hiders start in the room as in the
original) for ``--minutes`` (default 30) with the hide-and-seek recipe on an embedded cluster. The
only training opponent is the current policy itself: no random or scripted opponents.

From the training episodes (self-play, as the run's metrics recorded them):

- ``fort_rate``: mean ``fort_prep`` (every door of the room blocked by a hider-locked box at the end
  of preparation) over the last 10 % of training episodes;
- ``fort_rate_by_doors``: the same, over the episodes whose room had one door and over those with two;
- ``minutes_to``: wall-clock minutes from the first episode until the rolling mean (``--window``
  episodes) of a phase statistic first reached its milestone: ``fort`` (fort_prep >= 0.5), ``box_lock``
  (num_box_lock_prep >= 0.75: the untrained policy locks ~0.3 boxes in preparation by chance),
  ``seeker_in_room`` (>= 0.25), ``hidden_drop`` (hidden fraction at or below 0.8); null when never
  reached. ``minutes_to_fort`` repeats the first.

Then, on fixed seeds, ``--episodes`` per arm (``envs.hide_and_seek.evaluate.gains``):

- ``seeker_gain_pts``: points of play steps on which the trained seeker sees a random hider, over a
  random seeker;
- ``hider_gain_pts``: against the final trained seeker, points of play steps hidden, trained hider
  minus random hider.

How it could be fooled, and why it is not: training against the evaluation's opponent (uniform
random actions) would inflate both gains, so the recipe runs with no random opponents here; the
evaluation plays envs of its own, on seeds the training never used. The hider gain is measured
against the trained seeker, not a random one, since hiders that start in the room are already
hidden from a random seeker on ~93 % of play steps. The fort rate comes from self-play episodes, so a
hider that blocks doors only against a frozen opponent would not show up in it.

One 30-minute run of the defaults on 2 cores (gamma 0.998; 1 actor + 1 trainer, 14.6 M env steps,
2,373 updates): seekers learned to enter the room within a minute (seeker_in_room ~0.7, hidden
fraction 0.95 -> ~0.6), hiders answered by carrying boxes in preparation (max_box_move_prep ~0.3 m
-> ~1.5 m from ~6 M samples trained) and locking them, staying in the room until ~19 M samples and
partly leaving it after (hider_in_room ~0.75 at the end); the hidden fraction recovered to ~0.75.
No fort (fort_rate 0.012, doors_blocked_prep ~0.02-0.03). seeker_gain_pts 36.1, hider_gain_pts
20.4. The same run with gamma 0.99 (the earlier default): no box carrying, hiders left the room at
~4 M samples, fort_rate 0.0004, seeker_gain_pts 27.5, hider_gain_pts 4.3.

The fort figures in this docstring before this paragraph were counted with an earlier door rule
(the boxes' shadows on the door line leave no free stretch 0.3 m long), which called doors blocked
that trained seekers slipped through diagonally, between a wall's end and the corner of a box
standing ~0.2 m off the wall. The rule now (``envs.hide_and_seek.doors``) asks for a chain of
hider-locked boxes from wall to wall with every gap under 0.27 m, the narrowest gap agents were
seen to pass in either variant. Replayed on the final policy of the larger-batches run below
(3,072 self-play episodes), the old rule counted 63 forts (2.1 %), in 27 % of which the seeker got
more than 0.5 m into the room with every box still locked; the new rule counts 40 (1.3 %), in none
of which it did, and in them the hider stayed hidden on 87 % of play steps (64 % with no door
blocked). The defaults rerun under this rule (same command, 30 minutes, 2,496 updates, 15.3 M env
steps): hiders carried boxes from ~14 M samples trained (max_box_move_prep ~0.2 m -> ~1.5 m) while
half of them left the room, the fort rate rose to 0.030 by minute 18 and held ~0.028 to minute 26,
then the run turned over (hiders back in the room, locks and box carrying falling back, entropy
rising): fort_rate 0.009 over the last 10 %, seeker / hider gains 8.6 / -16.2.
Once more with the per-door rates (same command, 30 minutes, 13.1 M env steps, 2,130 updates): hiders
left the room in part from minute 3 (hider_in_room 0.56 at minute 6-12, 0.63 over the last 10 %)
and the two in-room shares swung against each other minute by minute; 0.7-1.6 locked boxes per
preparation from minute 3, box carrying from ~23 M samples trained. fort_rate 0.012: 0.025 in rooms
with one door, 0.0004 with two (one of two doors blocked in ~2 % of those); seeker / hider gains
33.4 / 14.0. A lone hider closes one door now and then and two doors almost never, so a fort rate of
0.5 needs it to close both doors in at least part of the two-door rooms.

Every hider_in_room / seeker_in_room figure in this docstring counts an agent as in the room once
its centre crossed the wall line; the statistic now asks for its whole disc past the wall's room
face, so a seeker pressed into a doorway that a locked cube closes no longer counts.

The same benchmark with the horizon reported as a termination instead of a truncation (no value
bootstrapped past the last play step; an experiment on an earlier tree): seeker_gain_pts 33.5,
hider_gain_pts 16.7, fort_rate 0.008, seekers in the room within a minute, hiders later leaving it
in part. It was not kept then: two 3-minute `make demo` runs of it ended with the trained seeker
seeing a random hider on 11 % and 8 % of play steps, against 16 % and 27 % with the truncation. It
is the default now, for the reason at the end of this docstring.

More experiments, not shipped (one run each):

- Doors observed (centre, orientation, width per door; otherwise an agent reads doors only off its
  lidar): as attention tokens, the fort rate reached 0.019 by minute 9 (0.002 without), then fell
  back to 0.012 as hiders took to leaving the room once seekers entered it; 6.7 M env steps (the
  longer attention cost 44 %), seeker / hider gains 33.2 / -12.6. Read through x_self instead (no
  throughput cost), the same story faster: 0.012 by minute 5, then hiders left the room and stopped
  locking boxes (stopped at minute 17).
- Batches four times larger (49,152 steps, 12,288-step minibatches, 364 updates): hiders stayed in
  the room (hider_in_room 0.94 at the end) and kept locking boxes (1.2 per preparation), the fort
  rate still rising at the end (0.004 at minute 6, 0.012 at 15, 0.019 over the last 10 %); seeker /
  hider gains 31.0 / 3.3. Too few updates for the 3-minute demo.
  The same configuration for 60 minutes (``--minutes 60``, a second run of it) did not keep rising:
  locked boxes per preparation peaked at 1.2 (minute 18, fort rate 0.014), fell to 0.3 by minute 27
  while hiders carried boxes further (max_box_move_prep up to 1.5 m), and from minute 40 hiders left
  the room (hider_in_room 0.45 over the last 10 %); fort_rate 0.0003, seeker / hider gains 17.3 / -2.4.
  With the spec's entropy weight (``--ppo ent_coef=0.01``) as well: the fort rate 0.018 by minute 12
  with one locked box per preparation, then locking fell to 0.25 and from minute 21 hiders left the
  room in part (hider_in_room 0.50 over the last 10 %); fort_rate 0.011, seeker / hider gains 5.2 / -13.9.
- Both together (doors through x_self, batches four times larger): ahead of the larger batches alone
  until minute 12 (fort rate 0.008 against 0.006), then seekers pulled ahead (seeker_in_room 0.80),
  box locking fell back, and the run ended with a fort rate of 0.008; seeker / hider gains 35.4 / -1.6.
- Whole episodes per fragment (80 steps, gae_lambda 0.99, so play rewards reach preparation's
  actions with little bootstrapping; 51,200-step batches in 12,800-step minibatches): 11.6 M env
  steps, the fort rate 0.019 by minute 12-15 with 1.3 locked boxes per preparation, then hiders left
  the room (hider_in_room 0.29 over the last 10 %) and box locking fell to 0.2; fort_rate 0.004,
  seeker / hider gains 7.8 / -17.5.
- One network per team (``--mapping per_team``): 10.0 M env steps (two smaller inference and
  training calls per step instead of one), the fort rate near 0.02 from minute 15 to 22 while hiders
  carried boxes (max_box_move_prep up to 1.6 m), then the teams cycled minute to minute (seeker_in_room
  between 0.05 and 0.65, hiders leaving the room and coming back); fort_rate 0.017, seeker / hider
  gains 3.3 / 7.5.
- Past versions as opponents (``--pool-every 50``: in half of the envs one team is played by one of
  the last 8 kept versions, every 50th, drawn uniformly): 9.8 M env steps and 1,191 updates (the
  frozen team's rows are not trained on). Seekers entered the room as before (hidden fraction 0.57
  by minute 9); from minute 15 hiders partly left the room (hider_in_room 0.74 at minute 21, 0.84 at
  the end) while carrying and locking more boxes (1.0 locked per preparation at the end), but hardly
  blocked a door (fort rate 0.006 at its best, minute 15; this figure also counts envs whose hider was
  a past version); fort_rate 0.002, seeker / hider gains 24.6 / 8.5.
- A count-based exploration bonus for box positions (under the new door rule): at the end of
  preparation each hider got 4 / sqrt(n) per box, n counting how often a box had ended preparation
  in that 0.2 m cell of the floor in the actor's envs. Hiders left the room sooner (hider_in_room
  0.54 by minute 6, 0.38 by minute 12) and locked fewer boxes (0.57 per preparation at minute 3,
  0.06 at minute 18); the fort rate never passed 0.009 (minute 9). Stopped at minute 18.
- Doors for the critic only (each door's centre, orientation and width as attention tokens the
  critic attends to and the policy never sees, so the value can tell a closed door from a box
  standing beside a wall): the course of the defaults. Seekers in the room by minute 3
  (seeker_in_room 0.68), locked boxes per preparation 0.84 by minute 6, then from minute 9 hiders
  left the room (hider_in_room 0.67, 0.49 at minute 12) and the fort rate stayed at 0.008-0.010.
  Stopped at minute 18.
- The original's reach for grab and lock (its released code measures 0.25 m from the agent's
  centre to the box, a 0.10 m gap from the disc, where this env allows a 0.25 m gap; lite only):
  hiders carried boxes far sooner (max_box_move_prep 0.7 m by minute 6, 1.5 m by minute 9, ~1.6 m
  to the end) but hardly locked them (0.12-0.16 per preparation from minute 6, 0.01-0.02 from
  minute 15), and no door was closed (doors_blocked_prep at most 0.007); hiders stayed hidden more
  (self-play hidden fraction ~0.80 from minute 15). 10.6 M env steps, fort_rate 0.0, seeker /
  hider gains 27.7 / 13.7.
- The spec's PPO settings (``--ppo lr=3e-4 --ppo ent_coef=0.01``; 8.6 M env steps, 1,403 updates;
  this run and the two before it had a slower machine, on which `make demo` made 62 % of the env
  steps it made on the defaults' run's machine): seekers entered the room more slowly
  (seeker_in_room 0.42 at minute 3, 0.64 at minute 9), the fort rate reached 0.010 by minute 9 while
  hiders stayed in the room, then from minute 12 hiders left it in part (hider_in_room 0.57-0.80)
  and box locking fell from 0.73 to 0.22 per preparation; fort_rate 0.007, seeker / hider gains
  24.5 / 1.2.
- Seekers' preparation steps left out of training (their actions are replaced by the neutral one
  then, so those rows were marked invalid: no policy gradient, entropy bonus or value loss from
  them; 20 % of the rows; lite only): the course of the defaults. Seekers in the room from minute 3
  (seeker_in_room 0.66), locked boxes per preparation 1.06 and the fort rate 0.007 at minute 3,
  0.012 at minute 9; then hiders stopped locking (0.14 per preparation at minute 12, 0.01 at
  minute 15) and left the room (hider_in_room 0.59 at minute 15), and the fort rate fell to 0.000.
  1,008 updates by minute 16, when it was stopped (on a machine as slow as the last three runs').
- Self-imitation (Oh et al. 2018), to replay the rare forts: each batch's 2 % of rows with the
  largest positive V-trace advantage went into a 24,576-row FIFO buffer, and every minibatch step
  also minimised -log pi(a|s) * max(R - V, 0) + 0.01 * max(R - V, 0)^2 / 2 (current V) over 1,024
  rows drawn from it. In four of the runs above, fort episodes returned the hider ~40 against ~15
  for the rest (minutes 3-12), but came one per update or fewer. Here hiders stayed in the room
  (hider_in_room 0.91 over the last 10 %) while seekers took over (seeker_in_room 0.72-0.76, hidden
  fraction 0.58-0.62 at minutes 6-21), box locking rose only late (0.35 per preparation at minute
  6, 0.8 at the end), and the fort rate crept from 0.001 to 0.004; 9.4 M env steps (13.1 M for
  the defaults just before it); fort_rate 0.004 (0.008 with one door, 0.0 with two), seeker /
  hider gains 35.8 / 11.9.
- Half the learning rate (``--ppo lr=3e-4``, the entropy weight left at 0.002), to slow the teams'
  minute-to-minute swings: the defaults' course. The fort rate 0.013 and 1.4 locked boxes per
  preparation at minute 6 with hiders in the room (0.99), then from minute 9 hiders left it in part
  (hider_in_room 0.61 at minute 9, 0.49 over the last 10 %) and locking fell to ~0.4; 10.8 M env
  steps, 1,763 updates; fort_rate 0.006 (0.012 with one door, 0.0004 with two), seeker / hider gains
  21.0 / 7.7.
- Two PPO epochs per batch (``--ppo epochs=2``; sample reuse 2, as the spec allows up to 4): 8.0 M
  env steps, 1,301 updates. The fort rate 0.012-0.013 at minutes 3-12 with hiders in the room and
  1.0-1.3 locked boxes per preparation, flat for those 9 minutes (~400 updates); at minute 12 hiders
  left the room (hider_in_room 0.35) and seekers stopped entering it (0.28), and the self-play hidden
  fraction rose to 0.78 from 0.66 with hiders in the room at minute 6: against the seeker of the
  moment, leaving the room paid more than the forts then built. Hiders then carried boxes
  (max_box_move_prep 0.3 m -> 1.5 m) but not to the doors: fort_rate 0.0001, seeker / hider gains
  30.7 / 6.4.
  In this run 40 % of the fort episodes moved no box more than 0.3 m in preparation, against 42 % of
  the other one-door episodes: boxes spawn in the room, some by a door, and carrying one did not
  make a fort likelier.
- Two hiders against two seekers (``--hiders 2 --seekers 2``, the spec's quadrant default: a hider
  for each door): the defaults' course at four agent rows per env step (5.2 M env steps, 1,268
  updates). Seekers in the room from minute 3 (seeker_in_room ~0.6), the two in-room shares swinging
  against each other (hider_in_room between 0.31 and 1.0 from minute to minute), and two hiders
  closed two doors no more often than one: the fort rate stayed at or below 0.003 in two-door rooms
  and 0.036 in one-door rooms in every minute. fort_rate 0.010 (0.020 with one door, 0.0 with two),
  seeker / hider gains 32.8 / -12.6.
- The cluster size's wider model (``recipes/hide_and_seek.py --minutes 30 --hidden 128 --embed 64``,
  figures from its run's metrics; 8.4 M env steps, 1,374 updates): seekers in the room by minute 3
  (0.70), hiders carrying boxes and leaving the room at minutes 6-9 (hider_in_room 0.62-0.63), and then
  the seekers gave up the room for good: seeker_in_room 0.005-0.009 in every 3-minute stretch from
  minute 12 to the end, the hidden fraction 0.93-0.97, at most 0.004 locked boxes per preparation.
  Fort rate 0.004 at its best (minute 7), 0.0 over the last 10 %; the trained seeker saw a random
  hider on 9 % of play steps (a random seeker 7 %), and against it the trained hider stayed hidden
  97 % (a random hider 91 %).
- No entropy bonus (``--ppo ent_coef=0``, against 0.002), so that a hider standing by a locked box
  would not unlock it by a chance 0 on its lock head: 13.2 M env steps, 2,154 updates. The defaults'
  start (seeker_in_room ~0.7 from minute 3; 0.9-1.1 locked boxes per preparation and the fort rate
  0.005-0.007 at minutes 3-9), then at minute 9 hiders left the room (hider_in_room 0.46) and all
  but stopped locking (0.10 boxes per preparation at minute 9, at most 0.004 from minute 21):
  fort_rate 0.0001, seeker / hider gains 11.1 / -3.1.
- GAE lambda 0.99 (``--ppo gae_lambda=0.99``, against 0.95), so that play rewards reach
  preparation's actions with less bootstrapping (the whole-episode run above changed the batch
  size too): 13.2 M env steps, 2,150 updates. Seekers in the room by minute 3 (0.69), 1.04 locked
  boxes per preparation and the fort rate 0.007 then; hiders left the room at minutes 6-9
  (hider_in_room 0.84, then 0.50) and locking fell to 0.03 by minute 12, came back to 0.34 at
  minute 18 (fort rate 0.012, 0.023 with one door) with half the hiders out of the room, and fell
  again: fort_rate 0.005, seeker / hider gains 21.5 / 2.8.

A fort does pay in this env: ``hide_and_seek_fort_payoff.py`` on the termination run's final
policy (one door closed by a hider-locked cube at the start of play) kept its hider hidden on 97.8 %
of play steps, against 75.5 % with the cube elsewhere (a hider standing still: 100 % against 33 %).
What self-play lacks on this budget is finding the fort, not a reason to build it.

The defaults once more, on the tree that added ``hide_and_seek_box_use.py`` (same command, 30
minutes, 14.2 M env steps, 2,313 updates): seekers in the room from minute 1 (seeker_in_room 0.67
at minutes 3-6), hiders locking ~0.45 boxes per preparation in the first 6 minutes and 0.03-0.3
after; until minute 24 the two in-room shares swung against each other and the self-play hidden
fraction stayed between 0.56 and 0.74. From minute 25 hiders kept to the room (hider_in_room ~0.9)
and carried a box through preparation (max_box_move_prep 0.5 m -> 1.6 m), and the hidden fraction
rose from 0.64 to 0.89 while a seeker was still in the room on half the play steps: the seekers'
success rose, then fell, but not to forts (fort_rate 0.004: 0.008 with one door, 0.0008 with two).
Seeker / hider gains 24.3 / 24.1, both above 20 in one run, as in the first defaults run above.
``hide_and_seek_box_use.py`` on its final policy: the hider holds a box on 78.5 % of play steps, on
55 % of those between itself and the nearest seeker (within 60° of the way to it; 1/3 by chance),
and is hidden on 92.4 % of play steps, 77.2 % with its grabs forced off. It carries the box as a
moving shield, which the fort rule (locked boxes only) does not count; ``hider_holds_play`` now
shows it on the curves. The final hiders of the two-epoch, 2 v 2, wider-model, no-entropy and
lambda-0.99 runs above held a box on 9.5, 9.4, 0.1, 0.0 and 12.1 % of play steps.

That run continued for 30 more minutes from its last checkpoint (``Run.resume(run_dir)``, 14.5 M
more env steps, 2,364 more updates, 60 minutes in all): the shield did not last. Hiders held a box
on 81 % of play steps in the first 3 minutes, 15 % by minutes 6-9; seekers were back in the room
(seeker_in_room 0.32 -> 0.35-0.49) and the self-play hidden fraction fell from 0.91 to 0.73-0.84;
half the hiders left the room (hider_in_room 0.95 -> 0.42-0.73). In the last 9 minutes hiders
carried and locked boxes again (0.14-0.25 locked per preparation, holding on 19-32 % of play
steps): fort rate 0.014 over the last 10 % (0.027 at minutes 27-30 with one door). Gains of the
60-minute policy: seeker 23.3, hider 12.1. The arms race cycles between entering, shielding and
leaving; in 60 minutes it did not reach forts.

On a GPU machine (one H200, 16 cores), ``--device cuda --actors 12`` puts the trainer and a policy
worker on the GPU and twelve actors on the cores (``hide_and_seek_throughput.py --device cuda``
measured 126.6 k trained rows/s at 12 actors and 87.3 k at 6; an earlier run on 2 cores, 14.4 k).
Two runs of the laptop-size model there:

- 4 minutes, 29 M samples trained at ~10 updates/s: box_lock at 0.29 minutes, seeker_in_room at
  0.32, hidden_drop at 0.61 (at minute 1.8: seeker_in_room 0.63, hidden fraction 0.61, 1.3 locked
  boxes per preparation). Then the policy's entropy fell from 2-4 to 0.02-0.2 and the seekers gave
  up the room (seeker_in_room 0.00-0.12 from minute 2.3, hidden fraction 0.91-0.98). After 2,360
  updates the loss became NaN and the policy worker failed on the NaN weights. The cause was not
  isolated; an overflowing float32 ratio is one way to get there (a behaviour probability of
  e^-200 does it on CPU), so the log-ratio is now capped and a non-finite gradient step is skipped.
- 3 minutes with those fixes, 21.5 M samples, 1,754 updates: seeker_in_room at 0.82 minutes,
  hidden_drop at 1.34, no box_lock; the entropy fell to 0.006 by minute 2.5 and the seekers left
  the room the same way. Seeker / hider gains -1.8 / 2.5 (100 episodes per arm), fort rate 0.

The GPU gives the samples; on this config they run into a collapse of the policy's entropy within
about 1,500 updates, before any fort.

Four actors on 2 cores (``--actors 4``, 30 minutes, 10.3 M env steps, 1,673 updates; policy lag
0.78 versions on average, at most 5, nothing dropped): the defaults' course until minute 24
(seeker_in_room 0.58 at minute 12, hidden fraction 0.64), then in one update (approx_kl 1.94 at
version ~1,426) the entropy fell from ~3 to 0.00 and stayed there: seekers left the room, the
hidden fraction went back to 0.96, nothing was locked. Seeker / hider gains 0.1 / 2.9, fort rate 0.

What that run and the GPU runs have in common shows in the value normaliser's statistics (the
trainer's ``value_mean`` and ``value_std``). A team's return lies within +-48 and the shared network
serves both teams of a zero-sum game, so the targets' mean should stay near 0 and their std below
48. With the horizon reported as a truncation, the critic's values at the last step are bootstrapped
from the critic itself, and nothing anchors them: by update 300 the targets' mean had drifted to
56 (one actor) and 125 (four actors), their std peaking at 115 and 313 on the way; the std reached
at least 390 in the 60-minute run and 538 in the GPU runs. The same config for 4 minutes with the horizon as a
termination kept the mean at 0.1-3.3 and the std at 21-29 through 251 updates. The horizon ends
the game, so the critic was estimating returns the game cannot pay.

Both variants now report the horizon as a termination. The same command on that
tree (30 minutes, 11.6 M env steps, 1,888 updates, nothing dropped): the targets' mean stayed within
-0.02 to 1.7 and their std within 9.9 to 28.2, the policy's entropy within 2.8 to 3.4 (no collapse);
seekers in the room at minute 1.0, the hidden fraction below 0.8 at minute 3.1, hiders out of the
room in part later (hider_in_room 0.51 over the last 10 %). fort_rate 0.004 (0.008 with one door, 0.0
with two), seeker / hider gains 33.6 / 17.4. A 3-minute ``make demo`` on it: 1.43 M env steps, 233
updates, the trained seeker saw a random hider on 17 % of play steps (a random seeker 7 %),
seeker_in_room rising steadily from 0 to ~0.55 and the hidden fraction falling from 0.95 to ~0.77.

A terminated horizon leaves the critic one thing it cannot read: after preparation nothing in its
input tells how many play steps remain (observation_self's clock stops at the end of preparation),
while a state's value is roughly the reward per step times the steps left. The critic now also reads
``episode_time`` (t / horizon; the policy never does). Two runs of the same command with it
(30 minutes each): 12.9 M env steps, 2,100 updates, seeker / hider gains 39.4 / 28.4 (this one on a
lite-only build of the same change); 12.1 M env steps, 1,970 updates, 33.9 / 20.2 (the committed tree;
a test file ran beside it for its first minute). Both gains above 20 in both, against 33.6 / 17.4
and 33.5 / 16.7 for the two terminated runs without the clock. The course did not change: seekers
in the room at minute 1.8-2.1 (the hidden fraction in 3-minute stretches down to 0.67 and 0.57),
hiders locking boxes in preparation (0.50 and 0.66 per preparation at the peak, minutes 3-12) and
closing the single door now and then (fort rate 0.020 in one-door rooms at minutes 12-15 of the
second run, its best), then leaving the room (hider_in_room 0.62 by minutes 6-9 in the first, 0.56
by minutes 12-15 in the second) while the hidden fraction recovered to ~0.8 and the seekers'
success fell. fort_rate 0.0002 in both. A 3-minute ``make demo`` with the clock: 1.42 M env steps, 231
updates, the trained seeker saw a random hider on 32 % of play steps (a random seeker 7 %; 17 % in
the demo without the clock above), seeker_in_room rising from 0 to ~0.65 and the hidden fraction
falling from 0.95 to ~0.68. A third 30-minute run with the clock (14.3 M env steps, 2,321 updates):
seeker / hider gains 39.9 / 18.6, fort_rate 0.0002, hiders out of the room in part from minute 6
(hider_in_room 0.57-0.68): the hider gain reached 20 in two of the three runs.

On the GPU machine again with the terminated horizon and the clock (``--device cuda --actors 12
--minutes 6 --episodes 100``): 36.3 M samples trained in 349 s of training (104 k trained rows/s;
43.8 M produced, 17 % of the fragments dropped as more than 12 versions stale), 2,951 updates,
samples 4 versions older than the newest in their batch on average (until the change below, the
trainer's ``policy_lag_mean`` counted from there, not from its own version, and read low). The value normaliser stayed in bounds (the targets' mean -8.1 to 3.4,
std 13.8-27.4 from update 20 on) and nothing became NaN. Seekers in the room at 0.27 minutes, the hidden fraction below
0.8 at 0.77, 0.75 locked boxes per preparation (rolling) at 5.6; the seekers' success rose and fell
three times (seeker_in_room 0 -> 0.5, down to 0.2 at ~14 M and ~24 M samples, up to 0.6 at the end)
with hiders in the room throughout (0.98) and the fort rate at most 0.005 in any minute: fort_rate
0.0007, seeker / hider gains 23.7 / 0.8. The entropy fell as on 2 cores to 3.9 by update 500 and
then on to 0.3-0.9 for good, after an update with approx_kl 58,375 near version 767: rows at the
log-ratio cap (an action the proximal policy all but ruled out, made likelier during the update)
with a negative advantage, whose unbounded ratio * A owned their minibatch's step. PPO's dual clip
(``PPOConfig.dual_clip``, 3 by default) now removes such a row's gradient. The same command with it
for 3.7 minutes (50 episodes per arm): 20.0 M samples trained in 210 s (95 k/s), 1,631 updates, the
dual clip acting on 0.002 % of rows; the largest approx_kl 1.45 (clip_frac 0.42, version 495),
after which the entropy fell from 1.8 to 0.8 and came back to 2.9-4.0 at versions 575-1,000 (the
hidden fraction down to 0.55, seeker_in_room 0.67 at minute 2), then fell again from 1.9 to 0.8 in
the updates with approx_kl 0.4-0.5 near version 1,180 and stayed at 0.6-1.3; seeker / hider gains
18.9 / -11.7, fort_rate 0.003. With 12 actors the GPU's updates still overshoot now and then, where one
actor on 2 cores (policy lag 0.4) never passed an approx_kl of 0.009 in four 30-minute runs.

The lag alone does it. ``hide_and_seek_policy_lag.py`` trains the laptop config in one process with
the actors acting on the weights of L updates before the trainer's (80 updates, seeds 0 and 1): the
95th percentile of the per-update approx_kl was 0.0017-0.0024 at L = 0, 0.003-0.006 at L = 3,
0.018-0.045 at L = 8 and 0.073-0.074 at L = 12, and the entropy after 80 updates 6.8-7.1, 6.5-6.8,
3.0-5.5 and 2.8-4.6. Four actors on 2 cores showed the same in their first 250 updates (95th
percentile 0.077 and, with the dual clip, 0.015, against 0.002 for one actor). Tried at L = 12 on a
draft of that script (fragments more than 12 versions old still dropped; there seed 0 gave 0.052
and entropy 4.4, seed 1 0.107 and 3.0), not shipped: advantages scaled but not centred (centring is
unbiased only on-policy) cut seed 0's 95th percentile to 0.012, not its entropy (4.4); V-trace's
rho_bar at 100 instead of 1 gave seed 0 0.010 and entropy 6.6, but seed 1 0.073 and 2.3; PPO's
ratio against the behaviour policy instead of the proximal one (``advantage="gae"``) kept the
entropy at 8.6 by barely learning.

The defaults once more with the dual clip and the lag counted from the trainer's version (same
command as the first run, 30 minutes): 13.3 M env steps, 2,160 updates, nothing dropped; policy lag
1.5 versions (0.4 as counted before), the largest approx_kl 0.012, the dual clip acting on 0.0001 %
of rows, the targets' mean 0.06-2.3 and std 13.3-30.1, the entropy 3.8-4.1 from minute 6. The
clock runs' course: seekers in the room at 2.7 minutes (seeker_in_room 0.55 at minutes 3-6, the
hidden fraction 0.69), 0.75 locked boxes per preparation (rolling) at 3.9, then hiders out of the
room in part from minute 6 (hider_in_room 0.41-0.60) and the hidden fraction back at ~0.72-0.74.
fort_rate 0.009 (0.017 with one door, 0.001 with two), seeker / hider gains 27.7 / 6.5.

No remedy of the samples gives the lag's harm back (``hide_and_seek_policy_lag.py`` records a
KL-targeted learning rate, V-trace without truncation and one step per update); fewer versions
between acting and training do. Every actor holds fragments in flight, so at a fixed batch the
lag grows with the actor count: ``hide_and_seek_throughput.py`` measured 1.46 versions at one actor
and 6.17 at four. The recipe at four actors on 2 cores for 10 minutes each (``recipes/hide_and_seek.py
--actors 4 --minutes 10 --eval-episodes 0``, 4.3 M env steps both): with the 12k-step batch, lag 6.2,
the entropy down to 1.6 by minute 9 and box locking in preparation gone (0.00 from minute 8,
seeker_in_room 0.66 at the end); with batch and minibatch four times larger (``--batch-steps 49152
--ppo minibatch_size=12288``; the same now: ``--ppo minibatches=1`` at four actors), lag 1.5, the entropy 6.0 at the end, 0.53 locked boxes per
preparation and rising, seeker_in_room 0.72. The showcase config then sized its batch and minibatch
per actor worker launched; the throughput benchmark measured lags of 1.41, 1.61 and 1.54 at
one, two and four actors. The benchmark with it at four actors (``--actors 4``, 30 minutes, 12.1 M
env steps, 493 updates): the lag 1.5 throughout, the largest approx_kl 0.0068, the entropy within
4.5-7.6 from update 100 (the earlier four-actor run above collapsed at minute 24). Seekers in the
room at 6.8 minutes, the hidden fraction below 0.8 at 8.5; then the defaults' course, hiders out of
the room in part from minute 22 (hider_in_room 0.47 over the last 10 %). fort_rate 0.005 (0.010
with one door, 0.0003 with two), seeker / hider gains 13.4 / -3.1: stable, but a quarter of one
actor's updates in the same 30 minutes, and one actor still learns more on 2 cores. Twelve GPU
actors get 147k-row batches in 37k-row minibatches: not yet run on a GPU machine.

That rule was fixed at launch, so actors added live acted further behind. The trainer now counts the
actors sending (``trainer.batch_per_actor``, four minibatches per update whatever the batch). Launched
at one actor and scaled to four at minute 1 (``recipes/hide_and_seek.py --minutes 10 --scale 1:4
--eval-episodes 0``, 4.2 M env steps, 230 updates): the lag 1.5 before and after, the largest
approx_kl per minute at most 0.006, the entropy 7.6 -> 5.2 by minute 10 while seekers learned to
enter the room (seeker_in_room 0.13 -> 0.72, the hidden fraction 0.94 -> 0.54). The same with the
launch's batch kept (``--trainer batch_per_actor=0``; 4.4 M env steps, 713 updates): the lag 6.2
from minute 2, the entropy down to 1.5 by minute 9 with approx_kl up to 0.058, and the seekers,
ahead until minute 5 (0.37 against 0.18 at minute 2), fell back to 0.36-0.48 at the end.

The defaults once more on that tree (one actor, so the same batches; 15.2 M env steps, 2,468
updates): seekers in the room by minute 1.1, the hidden fraction down to 0.60 by ~4 M samples,
back to 0.78 near 7 M as hiders partly left the room, then 0.62-0.68; no box carrying in
preparation, locks falling to 0.10 per preparation at the end, the entropy ~3.5 from minute 6.
fort_rate 0.0002, seeker / hider gains 40.9 / 9.1.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import time
from typing import Any

import numpy as np

from srl_lab.system.metrics import rolling_mean

MILESTONES = {  # name: (episode statistic, threshold, reached when the rolling mean is >= (+1) or <= (-1))
    "fort": ("fort_prep", 0.5, +1),
    "box_lock": ("num_box_lock_prep", 0.75, +1),
    "seeker_in_room": ("seeker_in_room", 0.25, +1),
    "hidden_drop": ("hidden_fraction", 0.8, -1),
}


def _recipe():
    path = os.path.join(os.path.dirname(__file__), "..", "recipes", "hide_and_seek.py")
    spec = importlib.util.spec_from_file_location("hide_and_seek_recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _episodes(episodes: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` of every episode that reported ``key`` (finite values only), in time order.

    ``episodes`` are ``run.metrics.episodes``: stamped with the time the trainer reported them."""
    points = [(e["time"], float(e[key])) for e in episodes
              if isinstance(e.get(key), (int, float)) and math.isfinite(e[key]) and e.get("time") is not None]
    points.sort(key=lambda point: point[0])  # by time only: a report's episodes keep their order
    return np.array([t for t, _ in points]), np.array([v for _, v in points])


def minutes_to(episodes: list[dict[str, Any]], key: str, threshold: float, direction: int, window: int,
               start: float) -> float | None:
    """Minutes from ``start`` until the rolling mean of ``key`` over ``window`` episodes crossed ``threshold``."""
    times, values = _episodes(episodes, key)
    if len(values) < window:
        return None
    rolling = rolling_mean(values, window)[window - 1:]  # full windows only
    hit = np.flatnonzero(direction * (rolling - threshold) >= 0)
    return None if not len(hit) else float((times[hit[0] + window - 1] - start) / 60)


def last_fraction_mean(episodes: list[dict[str, Any]], key: str, fraction: float = 0.1) -> float | None:
    """Mean of ``key`` over the newest ``fraction`` of the episodes that reported it."""
    _, values = _episodes(episodes, key)
    if not len(values):
        return None
    return float(values[-max(1, int(len(values) * fraction)):].mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes per arm")
    parser.add_argument("--window", type=int, default=200, help="episodes in the rolling means of the milestones")
    parser.add_argument("--size", default="laptop", help="showcase size (short: a CI smoke run)")
    parser.add_argument("--run-dir", default=f"runs/bench-hide-and-seek-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address (default: embedded cluster)")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE", help="PPOConfig overrides")
    parser.add_argument("--pool-every", type=int, default=0, metavar="VERSIONS",
                        help="also play past versions of the policy, every N-th kept (0: only the latest)")
    parser.add_argument("--mapping", default="shared", help="the recipe's --mapping (it checks the value)")
    parser.add_argument("--actors", type=int, default=1, help="actor workers")
    parser.add_argument("--device", default="cpu", help="the recipe's --device: cuda puts the trainer and a "
                                                        "policy worker on the GPU")
    parser.add_argument("--hidden", type=int, default=None, help="the model's dense width (default: the size's)")
    parser.add_argument("--embed", type=int, default=None, help="entity embedding width (default: the size's)")
    parser.add_argument("--batch-steps", type=int, default=None,
                        help="env-agent steps per update per actor worker sending (default: the size's)")
    parser.add_argument("--hiders", type=int, default=None, help="hiders per env (default: the size's)")
    parser.add_argument("--seekers", type=int, default=None, help="seekers per env (default: the size's)")
    args = parser.parse_args(argv)

    result = _recipe().main(["--minutes", str(args.minutes), "--run-dir", args.run_dir, "--size", args.size,
                             "--eval-episodes", str(args.episodes), "--pool-every", str(args.pool_every),
                             "--mapping", args.mapping, "--actors", str(args.actors), "--device", args.device,
                             *(["--hidden", str(args.hidden)] if args.hidden else []),
                             *(["--embed", str(args.embed)] if args.embed else []),
                             *(["--batch-steps", str(args.batch_steps)] if args.batch_steps else []),
                             *(["--hiders", str(args.hiders)] if args.hiders else []),
                             *(["--seekers", str(args.seekers)] if args.seekers else []),
                             *(["--scheduler", args.scheduler] if args.scheduler else []),
                             *(arg for assignment in args.ppo for arg in ("--ppo", assignment))])
    run, evaluation = result.pop("run"), result.pop("evaluation")
    episodes = list(run.metrics.episodes)
    episode_times = [e["time"] for e in episodes if e.get("time") is not None]
    start = min(episode_times) if episode_times else time.time()
    reached = {name: minutes_to(episodes, key, threshold, direction, args.window, start)
               for name, (key, threshold, direction) in MILESTONES.items()}
    print(json.dumps({
        "fort_rate": last_fraction_mean(episodes, "fort_prep"),
        "minutes_to_fort": reached["fort"],
        # the quadrant room has one door or two (with p=0.5 one wall has none): a lone hider has two
        # to close in half of the episodes, so the fort rate is also given per door count
        "fort_rate_by_doors": {str(doors): last_fraction_mean(
            [e for e in episodes if e.get("num_doors") == doors], "fort_prep") for doors in (1, 2)},
        "seeker_gain_pts": evaluation["seeker_gain_pts"],
        "hider_gain_pts": evaluation["hider_gain_pts"],
        "minutes_to": reached,
        "evaluation": evaluation,
        "training_last_10pct": {key: last_fraction_mean(episodes, key) for key in (
            "hidden_fraction", "hider_return", "doors_blocked_prep", "num_box_lock_prep", "seeker_in_room",
            "hider_in_room", "first_seen_step", "max_box_move_prep", "hider_holds_play")},
        "env_steps": result["env_steps"], "updates": result["version"], "minutes": args.minutes,
        "size": args.size, "ppo_overrides": args.ppo, "batch_steps": args.batch_steps,
        "pool_every": args.pool_every, "mapping": args.mapping, "hiders": args.hiders, "seekers": args.seekers,
        "actors": args.actors, "device": args.device, "hidden": args.hidden, "embed": args.embed,
        "milestone_window_episodes": args.window,
        "run_dir": run.run_dir,
    }))


if __name__ == "__main__":
    main()

"""What grand-challenge.org does with a challenge's images and data, done here: emulator.py runs an algorithm one job
per case as grand-challenge does and lays out the evaluation's input (`python -m medchallenge.grand_challenge.emulator`,
`medchallenge gc-emulate`); pack.py packs what an organiser uploads besides the images (`make gc-pack`)."""

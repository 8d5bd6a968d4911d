"""Hide-and-seek (Baker et al., 2020): a fast lite variant and a faithful MuJoCo one, one contract."""

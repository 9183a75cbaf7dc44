"""The ground floor: value types and their written forms. Pure: nothing here does I/O, and nothing here imports
anything of gitmail's but `gitmail.errors` and its own siblings."""

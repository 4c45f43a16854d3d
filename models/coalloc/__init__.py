"""Co-allocation math (Frank, ch. 2): interference model from Table 2.1, batch replay engine, efficiencies."""

"""SaNSA node-state math (Agarwal et al.): pure numpy."""

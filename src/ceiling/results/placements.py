"""Where the two ranks of a pair run: the vocabulary the network bench measures by
(metric names end in these keys) and the words every layer uses for them.

In results, not in cluster/ or report/, because a metric's name, a finding's
title, the summary and the HTML plots must all say the same thing.
"""

# In the order the network bench measures them.
PLACEMENT_TITLES = {"same_l3": "same L3", "same_socket": "same socket, different L3",
                    "cross_socket": "across sockets", "cross_node": "across nodes"}
PLACEMENTS = tuple(PLACEMENT_TITLES)

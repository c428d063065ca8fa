"""Activities of the node upgrade (R3d nodes): the Node facts planning and the "done" check read."""

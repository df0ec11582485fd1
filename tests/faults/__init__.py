"""The fault-injection suite (issue 22): the machine, the network, the model and the input
turning against the gateway. Each test shows that nothing accepted is lost, nothing is
doubled, and the operator is told; docs/reliability.md maps every fault to its test."""

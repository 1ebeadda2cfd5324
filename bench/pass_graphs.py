#!/usr/bin/env python3
"""Writes bench/passes.cpp's graphs as .fg text, for timing `fusegraph opt` on them.

    python3 bench/pass_graphs.py chain 100000 > chain100000.fg
    python3 bench/pass_graphs.py wide 100000 > wide100000.fg
    fusegraph opt wide100000.fg --passes=canonicalize,cse,dce,fuse --timing -o /dev/null
"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
ty = "f32[4, 64]"
if kind == "chain":
    # one value through n ops cycling silu, mul w, add b, relu, sqr, add b, sigmoid, mul w
    print(f"graph @main(input %x: {ty}, input %w: {ty}, input %b: {ty}) {{")
    prev = "x"
    ops = ["silu", "mul", "add", "relu", "sqr", "add", "sigmoid", "mul"]
    for i in range(n):
        op = ops[i % len(ops)]
        args = f"%{prev}, %w" if op == "mul" else f"%{prev}, %b" if op == "add" else f"%{prev}"
        print(f"  %v{i} = {op}({args}) : {ty}")
        prev = f"v{i}"
elif kind == "wide":
    # x0 + x1 + ... + xn as n adds
    args = ",\n".join(f"    input %x{i}: {ty}" for i in range(n + 1))
    print(f"graph @main(\n{args}) {{")
    prev = "x0"
    for i in range(n):
        print(f"  %s{i} = add(%{prev}, %x{i + 1}) : {ty}")
        prev = f"s{i}"
else:
    sys.exit("usage: pass_graphs.py chain|wide N")
print(f"  return %{prev}")
print("}")

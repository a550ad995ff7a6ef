#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every access form of cas_pairs runs and every CAS that must succeed does
# (cas_pairs exits non-zero otherwise).  No timing is asserted.
set -eu
"$1" --pairs=2000 --reps=3

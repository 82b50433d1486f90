#!/bin/sh
echo "filling $1"

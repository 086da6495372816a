// doctest's main(), compiled once into unit_test_main, which every unit-test binary links.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

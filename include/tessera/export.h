// SPDX-License-Identifier: Apache-2.0
// TESSERA_API marks what libtessera exports; everything else in the library stays hidden.
#pragma once

#define TESSERA_API __attribute__((visibility("default")))

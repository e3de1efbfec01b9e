// duet/export.h — which of libduet's names other programs may use.
//
// libduet.so is built with hidden symbols: only what its public headers mark
// DUET_API is exported, so plugins, the CLI and applications can link only
// against the plugin SDK (duet/*.h) and the application API (duet/app/*.h),
// never against core's internals. A class marked DUET_API exports its
// out-of-line members, vtable and typeinfo; a function, itself.
#pragma once

#define DUET_API __attribute__((visibility("default")))

// Marks a class defined inside libduet (a pimpl nested in an exported class)
// as not exported although its enclosing class is.
#define DUET_LOCAL __attribute__((visibility("hidden")))

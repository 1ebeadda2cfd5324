//===- Try.h - FG_TRY for the hyperparameter readers ------------*- C++ -*-===//
//
// Private to frontends/models (HParams.cpp and the families/ hooks): not
// included by any public header, so the macro stays out of other folders.
//
//===----------------------------------------------------------------------===//
#pragma once

/// `auto var = *expr`, or return expr's error from the enclosing function.
#define FG_TRY(var, expr)                                                                          \
  auto var##OrErr = (expr);                                                                        \
  if (!var##OrErr)                                                                                 \
    return var##OrErr.takeError();                                                                 \
  auto var = std::move(*var##OrErr);

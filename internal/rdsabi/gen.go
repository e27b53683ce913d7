// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

package rdsabi

//go:generate sh mkdefs.sh

# Build the Windows installer: run from the repository root in PowerShell, on Windows 10/11 x64
# with Python 3.11+ (python.org) and Inno Setup 6 (iscc.exe on PATH). NOT RUN on the project's
# machines (Linux only): see packaging/README.md.
#   powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1
$ErrorActionPreference = "Stop"
$version = (Select-String -Path pyproject.toml -Pattern '^version = "(.*)"').Matches[0].Groups[1].Value
if (-not (Test-Path .venv)) { py -3.11 -m venv .venv }
.venv\Scripts\python -m pip install -q -e ".[gui,packaging,video,sfm,mesh]"
.venv\Scripts\python -m PyInstaller packaging\pyinstaller\spirula.spec --distpath build\packaging\dist `
    --workpath build\packaging\work --noconfirm --log-level WARN
# the frozen bundle must pass its own self-test before it is wrapped (needs a Vulkan GPU driver)
& "build\packaging\dist\spirula-studio\spirula.exe" --selftest
if ($LASTEXITCODE -ne 0) { throw "the bundle's self-test failed" }
iscc /DAppVersion=$version packaging\windows\spirula.iss
Get-Item "dist\SpirulaStudio-$version-setup.exe" | Select-Object Name, Length

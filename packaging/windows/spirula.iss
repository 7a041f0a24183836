; Inno Setup 6 recipe of the Spirula Studio installer for Windows (x64).
; NOT BUILT OR TESTED on the project's machines (Linux only): see packaging/README.md.
;
; Build on Windows (packaging/windows/build.ps1 runs these):
;   py -3.11 -m venv .venv; .venv\Scripts\pip install -e .[gui,packaging,video,sfm,mesh]
;   .venv\Scripts\python -m PyInstaller packaging\pyinstaller\spirula.spec --distpath build\packaging\dist --workpath build\packaging\work --noconfirm
;   iscc /DAppVersion=0.1.0 packaging\windows\spirula.iss      -> dist\SpirulaStudio-0.1.0-setup.exe
;
; The bundle (build\packaging\dist\spirula-studio) holds `spirula.exe` (console: the CLI and
; `spirula --selftest`) and `Spirula Studio.exe` (windowed: the studio; opens a file given to it).

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "Spirula Studio"
#define Bundle "..\..\build\packaging\dist\spirula-studio"
#define ProgId "SpirulaStudio.ply"

[Setup]
AppId={{6B7E2C41-5A8F-4E0B-9C2D-3F1A7D5E9B10}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=Spirula Studio developers
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
PrivilegesRequiredOverridesAllowed=dialog
OutputDir=..\..\dist
OutputBaseFilename=SpirulaStudio-{#AppVersion}-setup
SetupIconFile=spirula.ico
UninstallDisplayIcon={app}\{#AppName}.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ChangesAssociations=yes
; the fox sample is under NVIDIA's non-commercial licence: shown before installing
InfoBeforeFile=..\..\resources\sample\fox\LICENSE.txt

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "plyassoc"; Description: "Open .ply files with {#AppName}"; GroupDescription: "File associations:"
Name: "path"; Description: "Add the spirula command to PATH"; GroupDescription: "Command line:"; Flags: unchecked

[Files]
Source: "{#Bundle}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppName}.exe"
Name: "{autoprograms}\{#AppName} self-test"; Filename: "{cmd}"; Parameters: "/k ""{app}\spirula.exe"" --selftest"; IconFilename: "{app}\{#AppName}.exe"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppName}.exe"; Tasks: desktopicon

[Registry]
; .ply: our ProgID, and in "Open with" for everyone; the default only with the task
Root: HKA; Subkey: "Software\Classes\{#ProgId}"; ValueType: string; ValueName: ""; ValueData: "3D Gaussian splat (PLY)"; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\{#ProgId}\DefaultIcon"; ValueType: string; ValueName: ""; ValueData: "{app}\{#AppName}.exe,0"
Root: HKA; Subkey: "Software\Classes\{#ProgId}\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\{#AppName}.exe"" gui ""%1"""
Root: HKA; Subkey: "Software\Classes\.ply\OpenWithProgids"; ValueType: string; ValueName: "{#ProgId}"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.ply"; ValueType: string; ValueName: ""; ValueData: "{#ProgId}"; Flags: uninsdeletevalue; Tasks: plyassoc
; videos: "Open with Spirula Studio" only (never the default player)
Root: HKA; Subkey: "Software\Classes\SpirulaStudio.video"; ValueType: string; ValueName: ""; ValueData: "Video (reconstruct in {#AppName})"; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\SpirulaStudio.video\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\{#AppName}.exe"" gui ""%1"""
Root: HKA; Subkey: "Software\Classes\.mp4\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.mov\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.m4v\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.avi\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.mkv\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.webm\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.mts\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.3gp\OpenWithProgids"; ValueType: string; ValueName: "SpirulaStudio.video"; ValueData: ""; Flags: uninsdeletevalue
; the spirula command on PATH (per user or machine, as installed)
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: path; Check: not IsAdminInstallMode and NeedsAddPath(ExpandConstant('{app}'))
Root: HKLM; Subkey: "SYSTEM\CurrentControlSet\Control\Session Manager\Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: path; Check: IsAdminInstallMode and NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\{#AppName}.exe"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Path: string;
begin
  if not RegQueryStringValue(HKCU, 'Environment', 'Path', Path) then
    Path := '';
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Path) + ';') = 0;
end;

// The Vulkan loader (vulkan-1.dll) comes with every current NVIDIA, AMD and Intel driver.
// Without it the studio cannot create a GPU device: say so now rather than at first start.
function InitializeSetup(): Boolean;
begin
  Result := True;
  if not FileExists(ExpandConstant('{sys}\vulkan-1.dll')) then
    Result := MsgBox('No Vulkan driver was found on this PC (vulkan-1.dll is missing).' + #13#10 +
                     'Spirula Studio needs a Vulkan 1.3 GPU driver: install the current driver from your ' +
                     'GPU vendor (NVIDIA, AMD or Intel), then run "Spirula Studio self-test".' + #13#10#13#10 +
                     'Install anyway?', mbConfirmation, MB_YESNO) = IDYES;
end;
